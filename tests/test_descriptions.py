"""Descriptions and options: every bad input is a DescriptionError; plurals find groups and classes."""

import math

import numpy as np
import pytest

from sdk.errors import DescriptionError
from sdk.format.bundle import ClassInfo
from sdk.text.resolver import TaskOptions, TaskResolver, singular_forms

CLASSES = [
    ClassInfo("n1", "monarch", ["animal", "insect", "butterfly", "monarch"], ["monarch butterfly"]),
    ClassInfo("n2", "sulphur butterfly", ["animal", "insect", "butterfly", "sulphur_butterfly"]),
    ClassInfo("n3", "goose", ["animal", "bird", "goose"]),
    ClassInfo("n4", "timber wolf", ["animal", "canine", "wolf", "timber_wolf"], ["grey wolf"]),
    ClassInfo("n5", "red fox", ["animal", "canine", "fox", "red_fox"]),
    ClassInfo("n6", "ladybug", ["animal", "insect", "beetle", "ladybug"]),
]


@pytest.fixture(scope="module")
def resolver():
    rng = np.random.default_rng(0)
    embeddings = rng.normal(size=(len(CLASSES), 8)).astype(np.float32)
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    return TaskResolver(CLASSES, embeddings, {"insects": [0, 1, 5]}, lambda text: embeddings[2] * 0.9)


@pytest.mark.parametrize("description,expected", [
    ("butterflies", {0, 1}), ("Butterflies", {0, 1}), ("wolves", {3}), ("canines", {3, 4}), ("insects", {0, 1, 5}),
    ("geese, ladybugs", {2, 5}), ("foxes, butterflies", {0, 1, 4}),
])
def test_plurals_find_groups_and_classes(resolver, description, expected):
    task = resolver.resolve(description, TaskOptions(min_classes=1))
    assert set(task.classes.tolist()) == expected


def test_a_plural_class_name_alone_takes_that_class(resolver):
    task = resolver.resolve("geese")
    assert 2 in task.classes and task.how[0].endswith("class name")


def test_singular_forms():
    assert singular_forms("butterflies")[0] == "butterfly" and singular_forms("wolves")[0] == "wolf"
    assert singular_forms("geese") == ["goose"] and "box" in singular_forms("boxes")
    assert singular_forms("sea lions")[-1] == "sea lion" and singular_forms("glass") == []


@pytest.mark.parametrize("description", [
    "", "   ", [], (), ["goose", 3], [b"goose"], b"goose", 42, None, {"goose"}, "goose\ud800", "go\u200bose",
    "goose\u202e", "goose\x00", "\x1b[31mgoose", "\ue000", "x" * 1001, ["x" * 1001], [""] * 10_001,
])
def test_bad_descriptions_are_description_errors(resolver, description):
    with pytest.raises(DescriptionError):
        resolver.resolve(description)


def test_tabs_and_newlines_are_whitespace(resolver):
    assert set(resolver.resolve("geese,\tladybugs\n").classes.tolist()) == {2, 5}


@pytest.mark.parametrize("options", [
    {"max_classes": 0}, {"max_classes": -3}, {"max_classes": 2.5}, {"max_classes": True}, {"max_classes": "5"},
    {"min_classes": 0}, {"min_classes": 5, "max_classes": 3}, {"margin": -1}, {"margin": math.nan},
    {"margin": math.inf}, {"margin": "0.1"}, {"min_contrast": -0.1}, {"min_contrast": 3}, {"min_contrast": None},
])
def test_bad_options_are_description_errors(options):
    with pytest.raises(DescriptionError):
        TaskOptions(**options)


def test_personalize_rejects_unknown_options_and_bad_descriptions_with_description_errors(tiny_bundle):
    import sdk

    bundle = sdk.load(tiny_bundle)
    for description, options in ((["red disc"], {"max_clases": 3}), ([], {}), ((), {}), ("blue", {"max_classes": 0}),
                                 ("blue", {"margin": float("nan")}), ("\ud83d", {})):
        with pytest.raises(DescriptionError):
            sdk.personalize(bundle, description, **options)
    with pytest.raises(DescriptionError):  # straight to the encoder: an unpaired surrogate
        bundle.encoder.encode(["a \udcff"])
