"""The mixer predictor: the one spec of its tensors, and its forward in numpy (task embedding -> alpha
[4, Q], a softmax per block row).

`layers` linear layers: `layers - 1` of Linear, BatchNorm (running statistics), ReLU, then the Linear
head to blocks x Q logits. The tensor names are torch's for trainer/mixer.py's `nn.Sequential` (which
checks itself against `tensor_shapes`), the bundle stores them under these names (sdk/format/bundle.py checks
them), and the Java mirror reads the same names (Mixer.java, pinned by the golden vectors).

>>> sorted(tensor_shapes(embed_dim=8, hidden=4, layers=2, blocks=4, num_bases=3).items())[:2]
[('body.0.bias', (4,)), ('body.0.weight', (4, 8))]
"""

from __future__ import annotations

import numpy as np

from sdk.fusion.architecture import BN_EPS, NUM_BLOCKS

NORM_PARTS = ("weight", "bias", "running_mean", "running_var")
HEAD = "head"


def linear_name(layer: int) -> str:
    """The Linear layer `layer` of the body (an `nn.Sequential` of Linear, BatchNorm, ReLU triples)."""
    return f"body.{3 * layer}"


def norm_name(layer: int) -> str:
    """The batch norm after Linear layer `layer`."""
    return f"body.{3 * layer + 1}"


def tensor_shapes(embed_dim: int, hidden: int, layers: int, blocks: int, num_bases: int) -> dict[str, tuple[int, ...]]:
    """Every tensor of a mixer predictor, by name, with its shape."""
    dims = [embed_dim] + [hidden] * (layers - 1)
    shapes: dict[str, tuple[int, ...]] = {}
    for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
        shapes[f"{linear_name(i)}.weight"], shapes[f"{linear_name(i)}.bias"] = (d_out, d_in), (d_out,)
        for part in NORM_PARTS:
            shapes[f"{norm_name(i)}.{part}"] = (d_out,)
    shapes[f"{HEAD}.weight"] = (blocks * num_bases, dims[-1])
    shapes[f"{HEAD}.bias"] = (blocks * num_bases,)
    return shapes


def uniform_alpha(num_bases: int) -> np.ndarray:
    """alpha [4, Q] averaging the bases equally in every block (the generic model, a few-shot candidate)."""
    return np.full((NUM_BLOCKS, num_bases), 1 / num_bases, np.float32)


def predict_alpha(tensors: dict[str, np.ndarray], layers: int, blocks: int, num_bases: int,
                  embedding: np.ndarray) -> np.ndarray:
    x = np.asarray(embedding, np.float32).reshape(1, -1)
    for i in range(layers - 1):
        x = x @ tensors[f"{linear_name(i)}.weight"].T + tensors[f"{linear_name(i)}.bias"]
        bn = norm_name(i)
        x = (x - tensors[f"{bn}.running_mean"]) / np.sqrt(tensors[f"{bn}.running_var"] + np.float32(BN_EPS))
        x = np.maximum(x * tensors[f"{bn}.weight"] + tensors[f"{bn}.bias"], 0)
    logits = (x @ tensors[f"{HEAD}.weight"].T + tensors[f"{HEAD}.bias"]).reshape(blocks, num_bases)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    alpha = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    return np.repeat(alpha, NUM_BLOCKS, axis=0) if blocks == 1 else alpha
