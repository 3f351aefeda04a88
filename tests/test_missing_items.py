"""Rules 2 and 4a of sdk/tasks.py (issue 50): a gloss is not cut at "and", and a one-word item that names
nothing in the bundle is said to be missing, with what was taken instead, never through a concept."""

import numpy as np
import pytest

from export.golden import COMPOSED_CLASSES as NAMES
from export.golden import COMPOSED_CONCEPTS, composed_resolver
from sdk.errors import DescriptionError
from sdk.tasks import MISSING, TaskOptions

AXES = len(NAMES) + len(COMPOSED_CONCEPTS)
CRAB, SEA = NAMES.index("crab"), len(NAMES) + [names[0] for names, _ in COMPOSED_CONCEPTS].index("sea")


def near_crab_and_sea(text: str) -> np.ndarray:
    """Nearer the concept 'sea' (crab, sea slug) than any class, the crab the closest class: the shape of
    'tree' against Tiny ImageNet (nearer the concept 'wood' than any class)."""
    if text in ("tuesday", "wednesday"):  # equally far from everything: no class stands out
        return np.full(AXES, AXES ** -0.5, np.float32)
    e = np.zeros(AXES, np.float32)
    e[CRAB], e[SEA] = 0.6, 0.8
    return e


@pytest.fixture
def resolver():
    encoded: list[str] = []

    def embed(text: str) -> np.ndarray:
        encoded.append(text)
        return near_crab_and_sea(text)

    r = composed_resolver(embed)
    r.encoded = encoded
    return r


def names(task) -> set[str]:
    return {NAMES[i] for i in task.classes}


def test_a_missing_word_alone_takes_the_nearest_classes_not_a_concept_and_says_so(resolver):
    task = resolver.resolve("tree", TaskOptions(min_classes=1))
    assert names(task) == {"crab"}
    (how,) = task.how
    assert MISSING in how and "instead" in how and "concept" not in how and "'crab'" in how


def test_a_missing_word_in_a_list_takes_its_closest_class_and_says_so(resolver):
    task = resolver.resolve("tree, mouse", TaskOptions(min_classes=1))
    assert names(task) == {"crab", "mouse"}
    assert task.how[0].startswith(f"'tree': {MISSING}: took the closest class 'crab'")
    assert task.how[1] == "'mouse': class name"


def test_a_missing_word_nothing_matches_is_left_out_of_a_list_and_fails_alone(resolver):
    task = resolver.resolve("tuesday, mouse", TaskOptions(min_classes=1))
    assert names(task) == {"mouse"}
    assert MISSING in task.how[0] and task.how[0].endswith("left out")
    with pytest.raises(DescriptionError, match=MISSING):
        resolver.resolve("tuesday")
    with pytest.raises(DescriptionError, match="nothing in this bundle matches any of"):
        resolver.resolve("tuesday, wednesday")


def test_a_phrase_of_several_words_still_takes_a_concept(resolver):
    task = resolver.resolve("seaside creatures", TaskOptions(min_classes=1))
    assert names(task) == {"crab", "sea slug"}
    assert "concept 'sea'" in task.how[0]


def test_a_gloss_is_one_phrase_and_a_list_of_names_is_cut(resolver):
    resolver.resolve("a drinking glass with a base and stem")
    assert resolver.encoded == ["a drinking glass with a base and stem"]   # embedded whole, not "stem" alone
    task = resolver.resolve("mouse and lion", TaskOptions(min_classes=1))
    assert names(task) == {"mouse", "lion"} and len(resolver.encoded) == 1  # two class names, no encoder
