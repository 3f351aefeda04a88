"""Self-improvement without a description (TAPER section 5.2): the images a device sees choose the task.

Start from the generic model (every class, the uniform mix of the bases: `TaperBundle.generic`). For
each batch of unlabelled images, the current network labels them over *every* class of the bundle
(its backbone with the full classifier, so classes outside the current task can still be found); the
counts add up over the batches seen, and the task becomes the classes predicted most often:

- classes predicted at least `min_count` times so far, most frequent first, at most `max_classes`;
- if fewer than `min_classes` qualify, the most frequent `min_classes` (ties: lower class index);
- with `pad_to`, a task of fewer classes is filled up to `pad_to` with the classes nearest to its
  classes by text embedding (the description rule `min_classes`, `sdk.text.resolver`);
- until `min_images` images have been labelled in all, the model stays generic (the counts still add
  up): a task chosen from one batch of 32 is mostly wrong, and narrowing to it fell far below the
  generic model (docs/results/self_improvement.md).

The model is then personalized for that class list (the mixer from its class embeddings, as for a
description listing them) and the next batch is labelled by the new network.

>>> model = bundle.generic()                         # doctest: +SKIP
>>> for batch in camera_batches:                     # doctest: +SKIP
...     model = model.adapt(batch)
>>> model = sdk.personalize(bundle, stream=camera_batches)   # the same loop  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from sdk.batches import run_in_batches
from sdk.errors import SdkError
from sdk.media.images import to_uint8_batch
from sdk.text.resolver import TaskOptions

# Most images labelled per adapt() call: bounds the time of one call (the counts keep all batches).
MAX_ADAPT_IMAGES = 10_000
# Images labelled before the first task is chosen. Bench (100 tasks, batches of 32, 40-epoch bundle):
# narrowing after 32 images fell to 16.4 against the generic 41.0, after 64 to 34.4; after 96 it is
# 43.2 and rises from there (experiments.md, "Self-improvement: when to narrow").
MIN_IMAGES = 96
# Most batches personalize(stream=) reads: bounds its time (a tiny-preset adapt() is ~5 ms, a full-width
# one ~40 ms: 1,000 batches are 5-40 s) for a finite sequence; an endless one is a loop of model.adapt.
MAX_STREAM_BATCHES = 1000


@dataclass(frozen=True)
class AdaptRule:
    """How pseudo-label counts become a task (see the module docstring)."""
    min_count: int = 2       # a class predicted once is more often a mistake than a class in view
    max_classes: int = 20
    min_classes: int = 2
    pad_to: int = 0          # 0: no padding
    min_images: int = MIN_IMAGES

    def __post_init__(self) -> None:
        for name in ("min_count", "max_classes", "min_classes", "pad_to", "min_images"):
            value = getattr(self, name)
            least = 0 if name in ("pad_to", "min_images") else 1
            if type(value) is not int or value < least:
                raise SdkError(f"{name} must be an integer of at least {least}, got {value!r}")
        if self.min_classes > self.max_classes:
            raise SdkError(f"min_classes ({self.min_classes}) is larger than max_classes ({self.max_classes})")

    def task(self, counts: np.ndarray) -> np.ndarray:
        """Sorted class indices chosen from pseudo-label counts [num classes]."""
        order = np.lexsort((np.arange(len(counts)), -counts))  # most frequent first, ties: lower index
        frequent = order[counts[order] >= self.min_count][: self.max_classes]
        chosen = frequent if len(frequent) >= self.min_classes else order[: self.min_classes]
        return np.sort(chosen)


def pseudo_labels(model, images: np.ndarray) -> np.ndarray:
    """Each image's most likely class over every class of the bundle, with `model`'s backbone (on either
    engine) and every class's row as the head."""
    network = model.network.with_head(*model.source.mixed_head(model.alpha))
    return run_in_batches(network, images, model.preprocessing).argmax(1)


def adapt(model, images, rule: AdaptRule | None = None):
    """The model re-personalized for what `images` (and the batches it adapted to before) show."""
    rule = rule or AdaptRule()
    bundle = model.source
    if bundle is None or model.head != "linear":
        raise SdkError("adapt() needs a model from sdk.personalize with a description or bundle.generic() "
                       "(a few-shot model's classes are the user's own)")
    batch = to_uint8_batch(images, model.preprocessing.input_size)[0]
    if len(batch) > MAX_ADAPT_IMAGES:
        raise SdkError(f"adapt() takes at most {MAX_ADAPT_IMAGES} images per call, got {len(batch)}")
    counts = np.zeros(len(bundle.classes), np.int64) if model.pseudo_label_counts is None \
        else model.pseudo_label_counts.copy()
    counts += np.bincount(pseudo_labels(model, batch), minlength=len(counts))
    if counts.sum() < rule.min_images:
        generic = bundle.generic()
        generic.pseudo_label_counts = counts
        generic.resolution = [f"generic: {int(counts.sum())} of the {rule.min_images} images needed before "
                              "choosing a task"]
        return generic
    task = rule.task(counts)
    ids = [bundle.bundle.classes[i].id for i in task]
    pad = max(rule.pad_to, rule.min_classes)
    adapted = bundle.personalize(ids, TaskOptions(max_classes=max(pad, rule.max_classes), min_classes=pad))
    adapted.pseudo_label_counts = counts
    padded = int((adapted.class_indices >= 0).sum())   # the bundle's classes it holds (not "anything else")
    adapted.resolution = [f"adapted to {len(task)} classes predicted at least {rule.min_count} times in "
                          f"{int(counts.sum())} images" + (f", padded to {padded}" if padded > len(task) else "")]
    return adapted


def adapt_stream(bundle, batches: Iterable, rule: AdaptRule | None = None):
    """`bundle.generic()` adapted to each batch in turn; the last model. At most MAX_STREAM_BATCHES
    batches are read (SdkError past them: a stream that never ends is a camera loop, which calls
    `model.adapt` itself). An exception the stream raises is passed through as it is."""
    try:
        batches = iter(batches)
    except TypeError:
        raise SdkError(f"stream= takes an iterable of image batches, got {type(batches).__name__}") from None
    model = bundle.generic()
    for count, batch in enumerate(batches):
        if count == MAX_STREAM_BATCHES:
            raise SdkError(f"stream= gave more than {MAX_STREAM_BATCHES} batches; for a stream that does not end, "
                           "call model.adapt(batch) for each batch instead")
        model = adapt(model, batch, rule)
    return model
