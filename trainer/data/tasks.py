"""k-way tasks that look like real requests, built from the class hierarchy.

- `neighbourhood` (paper protocol): for a label y, the task is y plus k-1 classes drawn from the 2k
  classes nearest to y in the hierarchy ("coffee pot" with "espresso maker").
- `supercategory`: y plus k-1 classes drawn from y's super-category, k = min(k, its size)
  ("insects", "dogs", "vehicles").
- `mixed`: each task is a neighbourhood or a super-category task, with probability 1/2 (stage 3 can
  train on both kinds of request).
- dynamic k: k drawn uniformly from [k_min, k_max] per task (clamped to the number of classes).

A task is a sorted int64 array of class indices that always contains its label. Everything is
deterministic under a seed.

>>> sampler = TaskSampler(hierarchy, k=20)                                          # doctest: +SKIP
>>> sampler.sample(label=3, rng=np.random.default_rng(0))                            # doctest: +SKIP
>>> sampler.evaluation_tasks(seed=0, per_class=1)     # the same list for the same seed   # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .hierarchy import ClassHierarchy

MODES = ("neighbourhood", "supercategory", "mixed")


@dataclass
class TaskSampler:
    hierarchy: ClassHierarchy
    k: int = 20
    mode: str = "neighbourhood"
    k_range: tuple[int, int] | None = None  # dynamic k, e.g. (5, 100)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.k < 2 and self.k_range is None:
            raise ValueError("k must be at least 2")
        if self.k_range is not None and not 2 <= self.k_range[0] <= self.k_range[1]:
            raise ValueError(f"k_range must satisfy 2 <= min <= max, got {self.k_range}")
        if self.mode != "neighbourhood":
            if not self.hierarchy.supercategories:
                raise ValueError("supercategory tasks need a hierarchy with super-categories")
            self._group = self.hierarchy.supercategory_of()
            self._members = [np.flatnonzero(self._group == g) for g in range(self._group.max() + 1)]

    def _draw_k(self, rng: np.random.Generator) -> int:
        k = self.k if self.k_range is None else int(rng.integers(self.k_range[0], self.k_range[1] + 1))
        return min(k, len(self.hierarchy))

    def sample(self, label: int, rng: np.random.Generator) -> np.ndarray:
        """A task containing `label`."""
        k = self._draw_k(rng)
        mode = self.mode if self.mode != "mixed" else ("neighbourhood", "supercategory")[int(rng.integers(2))]
        if mode == "neighbourhood":
            pool = self.hierarchy.nearest(label, 2 * k, rng)
        else:
            group = self._group[label]
            members = self._members[group] if group >= 0 else np.array([label])
            pool = members[members != label]
        others = rng.choice(pool, size=min(k - 1, len(pool)), replace=False)
        return np.sort(np.append(others, label)).astype(np.int64)

    def evaluation_tasks(self, seed: int, per_class: int = 1) -> list[np.ndarray]:
        """A fixed task set: `per_class` tasks anchored at each class, the same for the same seed."""
        rng = np.random.default_rng(seed)
        return [self.sample(y, rng) for y in range(len(self.hierarchy)) for _ in range(per_class)]
