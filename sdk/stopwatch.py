"""Milliseconds per step, as `PersonalizedModel.timings` reports them.

>>> watch = Stopwatch()
>>> watch.lap("resolve"); watch.lap("fuse_fold"); watch.lap("fuse_fold")
>>> sorted(watch.timings)
['fuse_fold', 'resolve']
"""

from __future__ import annotations

import time


class Stopwatch:
    """`lap(name)` adds the time since the previous lap (or creation) to `timings[name]` (ms): a step
    repeated, e.g. one fusion per few-shot candidate, is summed."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = round(self.timings.get(name, 0.0) + (now - self._t) * 1000, 3)
        self._t = now

    def total(self) -> dict[str, float]:
        """The timings with their sum as "total"."""
        return {**self.timings, "total": round(sum(self.timings.values()), 3)}
