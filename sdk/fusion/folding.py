"""Batch-norm folding: conv + BN (inference statistics) -> conv with bias.

W' = W * gamma / sqrt(var + eps) per output channel; b' = beta - mean * gamma / sqrt(var + eps).
`fold_batch_norm` writes into caller-provided arrays in the plain [O, I, kh, kw] layout (views of a
weight file: nothing is copied twice): the reference, and what exports use. Personalizing folds tile by
tile while it fuses, in the route's layout (`sdk.fusion.plan`), with the same `batch_norm_scale_shift`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from sdk.fusion.architecture import BN_EPS, CHANNEL_PARTS, conv_bn_pairs
from sdk.fusion.plan import batch_norm_scale_shift

BACKBONE_ALIGN = 64  # bytes; every folded weight of the backbone's external file starts on this boundary
BACKBONE_FILE = "backbone.weights"  # the external-data location the backbone graph's initializers name


def folded_names(shapes: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Names and shapes of the folded backbone's weights (convs with biases; no BN, no classifier)."""
    out = {}
    for conv, _ in conv_bn_pairs(shapes):
        out[conv + ".weight"] = tuple(shapes[conv + ".weight"])
        out[conv + ".bias"] = (shapes[conv + ".weight"][0],)
    return out


def backbone_layout(shapes: Mapping[str, tuple[int, ...]]) -> tuple[dict[str, dict], int]:
    """Where each folded weight lies in the backbone graph's external-data file: {name: {"offset" (bytes,
    64-aligned), "shape"}} in `folded_names` order, and the file's size. Computed from the architecture
    alone, so a bundle cannot move weights (the graph checker requires exactly this layout)."""
    layout, offset = {}, 0
    for name, shape in folded_names(shapes).items():
        layout[name] = {"offset": offset, "shape": list(shape)}
        size = 4 * math.prod(shape)
        offset += size + (-size % BACKBONE_ALIGN)
    return layout, offset


def fold_batch_norm(weights: Mapping[str, np.ndarray], out: Mapping[str, np.ndarray], eps: float = BN_EPS) -> None:
    """Fill `out[conv.weight]` and `out[conv.bias]` for every conv/BN pair of `weights` (float32)."""
    for conv, bn in conv_bn_pairs(weights):
        scale, shift = batch_norm_scale_shift(np.stack([weights[f"{bn}.{part}"] for part in CHANNEL_PARTS]), eps)
        weight = weights[conv + ".weight"]
        np.multiply(weight, scale.reshape((-1,) + (1,) * (weight.ndim - 1)), out=out[conv + ".weight"])
        out[conv + ".bias"][...] = shift
