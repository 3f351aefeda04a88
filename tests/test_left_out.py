"""Rule 2b of sdk/text/resolver/ (issue 72's review): an item that opens with a negation leaves out what the rest
of it names. Before it, the text encoder read "no birds", "not a cat" or "everything except cats" as near the
birds or the cats as the plain words, and took exactly the classes the user had excluded."""

import numpy as np
import pytest

from export.golden import COMPOSED_CLASSES as NAMES
from export.golden import composed_resolver
from sdk.errors import DescriptionError
from sdk.format.bundle import ClassInfo, Concept
from sdk.text.resolver import MAX_GROUP_CLASSES, TaskOptions, TaskResolver

ONE = TaskOptions(min_classes=1)
MAMMALS = {"mouse", "hamster", "elephant", "lion", "weasel"}
INSECTS = {"bee", "ant"}


def names(description: str, options: TaskOptions = ONE) -> set[str]:
    return {NAMES[i] for i in composed_resolver().resolve(description, options).classes}


def test_a_description_that_only_leaves_out_takes_every_other_class():
    """By name, without the text encoder (composed_resolver raises if it is asked)."""
    for text in ("everything except insects", "all but insects", "anything but insects", "except insects",
                 "no insects", "not insects", "without insects", "excluding insects", "non-insects",
                 "things that are not insects", "things that aren't insects"):
        assert names(text) == set(NAMES) - INSECTS, text
    task = composed_resolver().resolve("no mammals", ONE)
    assert task.how == ["'mammals': left out, group 'mammal'", f"every other class: {len(NAMES) - 5} of {len(NAMES)}"]
    # One negation opens the item and covers its parts; one that opens a part, that part.
    birds = {"goose", "penguin"}
    assert names("no mammals or birds") == names("not mammals, not birds") == set(NAMES) - MAMMALS - birds
    assert names("birds, not penguins") == names("birds and not penguins") == {"goose"}


def test_a_class_left_out_is_never_taken_back_as_padding():
    """The class nearest the one kept is the one left out here; a task of two is padded with another."""
    rows = np.array([[1, 0, 0], [0.9, 0.1, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    classes = [ClassInfo(f"n{i}", name, ["entity", name], []) for i, name in enumerate(("wolf", "dog", "cat", "owl"))]
    resolver = TaskResolver(classes, rows, {}, lambda text: rows[0], [Concept("c0", ["canines"], [0, 1])], rows[:1])
    two = TaskOptions(min_classes=2)
    assert resolver.resolve("canines, not dog", two).classes.tolist() == [0, 2]     # wolf, padded with cat
    assert resolver.resolve("wolf", two).classes.tolist() == [0, 1]                 # without it, the dog pads
    assert resolver.resolve("canines, not dog").classes.tolist() == [0]             # by default no padding


def test_what_leaves_nothing_or_out_nothing_is_refused_with_the_reading():
    r = composed_resolver()
    with pytest.raises(DescriptionError, match="nothing is left of"):
        r.resolve("mammals, not mammals", ONE)
    with pytest.raises(DescriptionError, match="no class is left"):
        r.resolve("no mammals, no birds, no invertebrates, no jack-o'-lanterns", ONE)
    with pytest.raises(DescriptionError, match="more than a description takes"):
        many = [ClassInfo(f"n{i}", f"thing {i}", ["entity"], []) for i in range(MAX_GROUP_CLASSES + 3)]
        eye = np.eye(len(many) + 1, dtype=np.float32)
        pair = [Concept("c", ["pair"], [0, 1])]
        TaskResolver(many, eye[:-1], {}, lambda t: eye[0], pair, eye[-1:]).resolve("no pair")


def test_a_name_that_opens_with_a_negation_word_is_that_name():
    rows = np.eye(3, dtype=np.float32)
    classes = [ClassInfo(f"n{i}", name, ["entity", name], []) for i, name in enumerate(("no entry sign", "stop sign",
                                                                                          "owl"))]
    resolver = TaskResolver(classes, rows, {}, lambda text: rows[2])
    assert resolver.resolve("no entry sign", ONE).classes.tolist() == [0]
    assert resolver.resolve("no entry signs, stop sign", ONE).classes.tolist() == [0, 1]


def test_a_missing_item_left_out_leaves_out_nothing_and_says_so(tiny_sdk):
    """On the tiny bundle, with its text encoder: an item it lacks is told missing, left out or not."""
    task = tiny_sdk.resolver.resolve("rings, without owls")
    assert "'owls': left out, not a name this bundle knows" in task.how[1]
    assert task.classes.tolist() == tiny_sdk.resolver.resolve("rings").classes.tolist()
    with pytest.raises(DescriptionError, match="nothing in this bundle is left out by"):
        tiny_sdk.resolver.resolve("no owl")


def test_what_a_composition_excludes_is_no_padding_either(tiny_sdk):
    """Rule 3b's "Y except X" leaves X out as rule 2b does: the red ring is the rings' nearest class after the three
    kept ("a vehicle which is not a car" took the tractor, then a sports car as padding)."""
    names = tiny_sdk.classes
    task = tiny_sdk.resolver.resolve("rings other than red ring", TaskOptions(min_classes=4))
    assert [names[i] for i in task.classes[:3]] == ["green ring", "blue ring", "yellow ring"]
    assert "red ring" not in [names[i] for i in task.classes] and len(task.classes) == 4
