"""Part of each class's training images: the first ones of each class, in the cache's stored order.

Two uses, both deterministic (the same rows on every machine and in every run):
- `train_images_per_class`: a run on fewer images per class. At width 0.25 the bench's network does
  not fit its 100,000 training images (49.5% training accuracy after 40 epochs); on fewer it can,
  as the full-width network fits all of them on the GPU (98.4-100% from epoch 60 of 100). That makes
  the GPU's memorisation regime measurable on this CPU.
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
    classes, starts, sizes = np.unique(labels[order], return_index=True, return_counts=True)
    kept = []
    for start, size in zip(starts, sizes, strict=True):
        n = min(count, size) if count is not None else max(1, math.ceil(share * size))
        kept.append(order[start:start + n])
    return np.sort(np.concatenate(kept)) if kept else np.empty(0, np.int64)


def with_train_images_per_class(data: DecodedDataset, count: int) -> DecodedDataset:
    """`data` with only the first `count` training images of each class (val unchanged)."""
    return replace(data, train=data.train.subset(first_rows_per_class(data.train.labels, count=count)))
