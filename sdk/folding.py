"""Batch-norm folding: conv + BN (inference statistics) -> conv with bias.

W' = W * gamma / sqrt(var + eps) per output channel; b' = beta - mean * gamma / sqrt(var + eps).
`fold_batch_norm` writes into caller-provided arrays in the plain [O, I, kh, kw] layout (views of a
weight file: nothing is copied twice). The compiled route folds tile by tile while it fuses, in its
blocked layout (`sdk.compiled.DeviceBases.fuse_and_fold`), with the same `batch_norm_scale_shift`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from .architecture import conv_bn_pairs

BN_EPS = 1e-5
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


def batch_norm_scale_shift(weights: Mapping[str, np.ndarray], bn: str, eps: float = BN_EPS
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Batch norm `bn` at inference as y = x * scale + shift, per channel."""
    scale = weights[bn + ".weight"] / np.sqrt(weights[bn + ".running_var"] + np.float32(eps))
    return scale, weights[bn + ".bias"] - weights[bn + ".running_mean"] * scale


def fold_batch_norm(weights: Mapping[str, np.ndarray], out: Mapping[str, np.ndarray], eps: float = BN_EPS) -> None:
    """Fill `out[conv.weight]` and `out[conv.bias]` for every conv/BN pair of `weights` (float32)."""
    for conv, bn in conv_bn_pairs(weights):
        scale, shift = batch_norm_scale_shift(weights, bn, eps)
        weight = weights[conv + ".weight"]
        np.multiply(weight, scale.reshape((-1,) + (1,) * (weight.ndim - 1)), out=out[conv + ".weight"])
        out[conv + ".bias"][...] = shift
