"""Fusion: the weights of a personalized network as one GEMV per mixer block.

bases[b] is a contiguous [Q, P_b] matrix memory-mapped from the bundle; alpha[b] @ bases[b] gives every
weight of block b at once, written into a preallocated buffer (`out=`: no temporaries, no per-tensor
Python loop). The compiled route fuses its own reordered copy of the bases, in tiles
(`sdk.compiled.DeviceBases`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .architecture import NUM_BLOCKS

if TYPE_CHECKING:
    from .compiled import DeviceBases


@dataclass
class WeightBuffer:
    """What one personalization fuses into (named `params`; on the standard route `rows`, one per block)
    and folds into (`folded`), in one route's layout: a plain external-data file (`data`), or the
    compiled session's inputs (`feeds`)."""
    rows: list[np.ndarray]                       # standard route: fused block rows (empty on the compiled one)
    params: dict[str, np.ndarray]
    folded: dict[str, np.ndarray]
    data: np.ndarray
    feeds: dict[str, np.ndarray] | None = None   # compiled route: graph input -> its array in `data`
    device: DeviceBases | None = None            # compiled route: the layout it was made for
    in_use: bool = False                         # given to a model (compiled route)


def fuse_blocks(alpha: np.ndarray, bases: list[np.ndarray], out: list[np.ndarray]) -> None:
    """out[b][:] = alpha[b] @ bases[b] for every block."""
    for b in range(NUM_BLOCKS):
        np.dot(alpha[b], bases[b], out=out[b])


def unflatten(blocks: list[np.ndarray], layout: list[list[str]], shapes: dict[str, tuple[int, ...]]
              ) -> dict[str, np.ndarray]:
    """Named views into the fused block rows (no copies)."""
    views = {}
    for flat, names in zip(blocks, layout, strict=True):
        offset = 0
        for name in names:
            size = int(np.prod(shapes[name], dtype=np.int64))
            views[name] = flat[offset:offset + size].reshape(shapes[name])
            offset += size
    return views
