"""Batch-norm folding: conv + BN (inference statistics) -> conv with bias.

W' = W * gamma / sqrt(var + eps) per output channel; b' = beta - mean * gamma / sqrt(var + eps).
Written into caller-provided arrays (the engine's weight buffer), so folding copies nothing twice.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .architecture import conv_bn_pairs

BN_EPS = 1e-5


def folded_names(shapes: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Names and shapes of the folded backbone's weights (convs with biases; no BN, no classifier)."""
    out = {}
    for conv, _ in conv_bn_pairs(shapes):
        out[conv + ".weight"] = tuple(shapes[conv + ".weight"])
        out[conv + ".bias"] = (shapes[conv + ".weight"][0],)
    return out


def fold_batch_norm(weights: Mapping[str, np.ndarray], out: Mapping[str, np.ndarray], eps: float = BN_EPS) -> None:
    """Fill `out[conv.weight]` and `out[conv.bias]` for every conv/BN pair of `weights` (float32)."""
    for conv, bn in conv_bn_pairs(weights):
        scale = weights[bn + ".weight"] / np.sqrt(weights[bn + ".running_var"] + np.float32(eps))
        np.multiply(weights[conv + ".weight"], scale.reshape(-1, 1, 1, 1), out=out[conv + ".weight"])
        np.subtract(weights[bn + ".bias"], weights[bn + ".running_mean"] * scale, out=out[conv + ".bias"])
