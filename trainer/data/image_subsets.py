"""Part of each class's training images: the first ones of each class, in the cache's stored order.

Two uses, both deterministic (the same rows on every machine and in every run):
- `train_images_per_class`: a run on fewer images per class, where a small network fits more of its
  training set (width 0.25, the paper recipe: 81% training accuracy on 100 images a class, 87% on 50,
  against 50% for the bench on all 500; medians over the last tenth of stage 1's logged steps,
  scripts/training_signal.py). Not the full-width network's 99.8% on the GPU, though (experiments.md,
  "The full-width failure on this CPU?").
- `stage1_image_fraction`: stage 1 trains on a share of each class's images, so that stages 2 and 3
  (and the baseline's continuation) also see images that stage 1 never fitted.

>>> first_rows_per_class(np.array([0, 0, 1, 1, 1, 0]), count=2).tolist()
[0, 1, 2, 3]
>>> first_rows_per_class(np.array([0, 0, 1, 1, 1, 0]), share=0.5).tolist()
[0, 1, 2, 3]
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from .cache import DecodedDataset
from .errors import DataError


def first_rows_per_class(labels: np.ndarray, count: int | None = None, share: float | None = None) -> np.ndarray:
    """Sorted row indices of the first `count` images of each class, or the first ceil(share x n_c) of a
    class with n_c images (at least one). Exactly one of `count` and `share` is given."""
    if (count is None) == (share is None):
        raise ValueError("give exactly one of count and share")
    if count is not None and count < 1:
        raise DataError(f"images per class must be at least 1, got {count}")
    if share is not None and not 0 < share <= 1:
        raise DataError(f"a share of each class's images must be in (0, 1], got {share}")
    labels = np.asarray(labels)
    order = np.argsort(labels, kind="stable")                  # each class's rows, in stored order
    _, starts, sizes = np.unique(labels[order], return_index=True, return_counts=True)
    kept = []
    for start, size in zip(starts, sizes, strict=True):
        n = min(count, size) if count is not None else max(1, math.ceil(share * size))
        kept.append(order[start:start + n])
    return np.sort(np.concatenate(kept)) if kept else np.empty(0, np.int64)


def with_train_images_per_class(data: DecodedDataset, count: int) -> DecodedDataset:
    """`data` with only the first `count` training images of each class (val unchanged)."""
    return replace(data, train=data.train.subset(first_rows_per_class(data.train.labels, count=count)))
