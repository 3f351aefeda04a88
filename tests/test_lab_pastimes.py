"""lab/pastimes.py, the measurement behind a rule not shipped (docs/results/experiments.md, "A word for a pastime is
no missing thing"): its wrapper lets a listed word past rule 4a, and its WordNet list keeps pastimes that name no
thing."""

import numpy as np
import pytest

from lab.pastimes import pastimes, reading_pastimes
from scripts.wordnet_files import WORDNET
from sdk.format.bundle import ClassInfo
from sdk.text.resolver.pipeline import TaskResolver

CLASSES = [ClassInfo("n1", "basketball", ["artifact", "ball", "basketball"]),
           ClassInfo("n2", "volleyball", ["artifact", "ball", "volleyball"]),
           ClassInfo("n3", "beagle", ["animal", "dog", "beagle"])]


def test_the_wrapper_lets_a_listed_word_past_rule_4a(monkeypatch):
    resolver = TaskResolver(CLASSES, np.eye(3, dtype=np.float32), {},
                            lambda text: np.array([0.9, 0.88, 0.0], np.float32))
    assert resolver.resolve("ballgames, beagle").how[0].startswith("'ballgames': not a name this bundle knows")
    monkeypatch.setattr(TaskResolver, "_unknown", reading_pastimes(frozenset({"ballgame"}), TaskResolver._unknown))
    assert sorted(resolver.resolve("a ballgame").classes) == [0, 1]
    assert resolver.resolve("owls, beagle").how[0].startswith("'owls': not a name this bundle knows")


def test_the_list_keeps_pastimes_that_name_no_thing():
    if not (WORDNET / "data.noun").is_file():
        pytest.skip("needs Debian's wordnet-base")
    listed = pastimes()
    assert {"ballgame", "boxing", "tango", "golf"} <= listed
    assert not {"football", "basketball", "painting", "owl"} & listed   # a thing too, or only a thing
