"""Self-improvement (sdk.adapt): the task rule, pseudo-labels over every class, the stream helper."""

import numpy as np
import pytest

import sdk
from sdk.adapt import AdaptRule, pseudo_labels
from sdk.errors import DescriptionError, SdkError


def test_rule_takes_frequent_classes_most_frequent_first():
    counts = np.array([5, 1, 0, 3, 3, 2, 9])
    assert AdaptRule(min_count=2).task(counts).tolist() == [0, 3, 4, 5, 6]
    assert AdaptRule(min_count=2, max_classes=3).task(counts).tolist() == [0, 3, 6]  # 9, 5, then 3 (lower index)
    assert AdaptRule(min_count=6, min_classes=2).task(counts).tolist() == [0, 6]     # too few: the top two
    for bad in ({"min_count": 0}, {"max_classes": 1.5}, {"min_classes": 3, "max_classes": 2}):
        with pytest.raises(SdkError):
            AdaptRule(**bad)


def test_pseudo_labels_are_the_generic_models_predictions(tiny_sdk, tiny_data):
    generic = tiny_sdk.generic()
    assert generic.classes == tiny_sdk.classes
    images = np.asarray(tiny_data.val.images[:40])
    np.testing.assert_array_equal(pseudo_labels(generic, images), generic.logits(images).argmax(1))


def test_adapting_finds_the_classes_in_view_and_accumulates_counts(tiny_sdk, tiny_data):
    shown = [0, 9, 17]
    rows = np.flatnonzero(np.isin(tiny_data.train.labels, shown))
    images = np.asarray(tiny_data.train.images[rows])
    first = tiny_sdk.generic().adapt(images[::2], min_images=0)
    assert first.pseudo_label_counts.sum() == len(images[::2])
    second = first.adapt(images[1::2], min_images=0)
    assert second.pseudo_label_counts.sum() == len(images)
    assert set(shown) <= set(second.class_indices.tolist())  # the tiny model labels its training images well
    assert len(second.classes) <= 20
    streamed = sdk.personalize(tiny_sdk, stream=[images[::2], images[1::2]], min_images=0)
    assert streamed.classes == second.classes
    np.testing.assert_array_equal(streamed.pseudo_label_counts, second.pseudo_label_counts)


def test_adapt_refuses_what_it_cannot_do(tiny_sdk, tiny_data, monkeypatch):
    images = np.asarray(tiny_data.train.images[:6])
    few_shot = sdk.personalize(tiny_sdk, examples={"a": images[:3], "b": images[3:]})
    with pytest.raises(SdkError, match="few-shot"):
        few_shot.adapt(images)
    with pytest.raises(DescriptionError, match="only one"):
        sdk.personalize(tiny_sdk, "round shapes", stream=[images])
    with pytest.raises(DescriptionError, match="unknown options"):  # a description's option, not a rule's
        sdk.personalize(tiny_sdk, stream=[images], margin=0.1)
    with pytest.raises(SdkError, match="min_count"):
        sdk.personalize(tiny_sdk, stream=[images], min_count=0)
    monkeypatch.setattr("sdk.adapt.MAX_ADAPT_IMAGES", 5)
    with pytest.raises(SdkError, match="at most 5"):
        tiny_sdk.generic().adapt(images)


def test_a_stream_is_an_iterable_read_up_to_a_bound_and_its_own_errors_pass_through(tiny_sdk, tiny_data, monkeypatch):
    images = np.asarray(tiny_data.train.images[:4])
    with pytest.raises(SdkError, match="iterable of image batches, got int"):
        sdk.personalize(tiny_sdk, stream=42)

    def endless():
        while True:
            yield images

    monkeypatch.setattr("sdk.adapt.MAX_STREAM_BATCHES", 3)
    with pytest.raises(SdkError, match="more than 3 batches"):
        sdk.personalize(tiny_sdk, stream=endless())
    assert sdk.personalize(tiny_sdk, stream=[images] * 3).classes   # exactly the bound: read

    class CameraGone(Exception):
        pass

    def failing():
        yield images
        raise CameraGone()

    with pytest.raises(CameraGone):   # the caller's own exception, as it is
        sdk.personalize(tiny_sdk, stream=failing())


def test_model_stays_generic_until_enough_images_were_seen(tiny_sdk, tiny_data):
    images = np.asarray(tiny_data.train.images[np.flatnonzero(np.isin(tiny_data.train.labels, [0, 9, 17]))])
    half = len(images) // 2
    first = tiny_sdk.generic().adapt(images[:half], min_images=len(images))
    assert first.classes == tiny_sdk.classes and first.pseudo_label_counts.sum() == half  # counted, not narrowed
    assert "generic" in first.resolution[0]
    second = first.adapt(images[half:], min_images=len(images))
    assert len(second.classes) < len(tiny_sdk.classes) and second.pseudo_label_counts.sum() == len(images)
    assert set(AdaptRule().task(second.pseudo_label_counts).tolist()) <= set(second.class_indices.tolist())
    assert AdaptRule().min_images == 96
    with pytest.raises(SdkError, match="min_images"):
        AdaptRule(min_images=-1)
