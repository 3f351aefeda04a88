"""The mixer predictor in numpy: task embedding -> alpha [4, Q] (softmax per block row).

Mirrors trainer/mixer.py in inference mode: Linear, BatchNorm (running statistics), ReLU, ..., Linear.
"""

from __future__ import annotations

import numpy as np

from .architecture import BN_EPS, NUM_BLOCKS


def uniform_alpha(num_bases: int) -> np.ndarray:
    """alpha [4, Q] averaging the bases equally in every block (the generic model, a few-shot candidate)."""
    return np.full((NUM_BLOCKS, num_bases), 1 / num_bases, np.float32)


def predict_alpha(tensors: dict[str, np.ndarray], layers: int, blocks: int, num_bases: int,
                  embedding: np.ndarray) -> np.ndarray:
    x = np.asarray(embedding, np.float32).reshape(1, -1)
    for i in range(layers - 1):
        x = x @ tensors[f"body.{3 * i}.weight"].T + tensors[f"body.{3 * i}.bias"]
        bn = f"body.{3 * i + 1}"
        x = (x - tensors[f"{bn}.running_mean"]) / np.sqrt(tensors[f"{bn}.running_var"] + np.float32(BN_EPS))
        x = np.maximum(x * tensors[f"{bn}.weight"] + tensors[f"{bn}.bias"], 0)
    logits = (x @ tensors["head.weight"].T + tensors["head.bias"]).reshape(blocks, num_bases)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    alpha = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    return np.repeat(alpha, NUM_BLOCKS, axis=0) if blocks == 1 else alpha
