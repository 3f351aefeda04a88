"""lab/closed_compounds.py, the measurement behind a reverted rule (docs/results/experiments.md, "Closed compounds
read as their two words"): its wrapper reads a listed word that rule 4a tells missing as its two words, and its
WordNet list keeps compounds that name no thing."""

import numpy as np
import pytest

from lab.closed_compounds import closed, spaced, with_rule
from scripts.wordnet_files import WORDNET
from sdk.format.bundle import ClassInfo, Concept
from sdk.text.resolver.pipeline import TaskResolver

CLASSES = [ClassInfo("n1", "bee", ["animal", "insect", "bee"]),
           ClassInfo("n2", "ladybug", ["animal", "insect", "ladybug"]),
           ClassInfo("n3", "beagle", ["animal", "dog", "beagle"])]


def test_the_wrapper_reads_a_listed_word_as_its_two_words_only_where_they_take_classes():
    resolver = TaskResolver(CLASSES, np.eye(3, dtype=np.float32), {}, lambda text: np.eye(3, dtype=np.float32)[2],
                            [Concept("c1", ["small animals"], [1, 2])], np.zeros((1, 3), np.float32))
    tried = with_rule(resolver, {"smallinsect": "small insect", "owlcity": "owl city"})
    assert resolver.resolve("smallinsects, bee").how[0].startswith("'smallinsects': not a name this bundle knows")
    task = tried.resolve("smallinsects, bee")
    assert sorted(task.classes) == [0, 1]
    assert task.how[0] == ("'smallinsects': read as 'small insects' (a compound, WordNet's): 'small animals' "
                           "within group 'insects'")
    assert tried.resolve("owlcities, bee").how[0].startswith("'owlcities': not a name this bundle knows")


def test_the_list_keeps_compounds_that_name_no_thing():
    if not (WORDNET / "data.noun").is_file():
        pytest.skip("needs Debian's wordnet-base")
    listed = closed()
    assert listed["ballgame"] == "ball game" and listed["housecleaning"] == "house cleaning"
    assert not {"songbird", "raincoat", "starfish", "firefly"} & set(listed)


def test_the_second_list_is_wordnets_spaced_synonyms():
    if not (WORDNET / "data.noun").is_file():
        pytest.skip("needs Debian's wordnet-base")
    listed = spaced()
    assert listed["ballgame"] == "ball game" and listed["postcard"] == "post card"
    assert "songbird" not in listed and all(" " not in word for word in listed)   # WordNet has no "song bird"
