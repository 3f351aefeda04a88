"""Run a network on a given dict of weights, without copying the module.

Mixed weights (a linear combination of bases) are plain tensors; `functional_forward` runs the
module's own forward with them, so autograd flows into whatever produced them.

>>> model = ResNet18(ResNetConfig(width=0.25, num_classes=10, input_size=64))   # doctest: +SKIP
>>> functional_forward(model, dict(model.state_dict()), x)                      # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn
from torch.func import functional_call


def functional_forward(model: nn.Module, weights: Mapping[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """`model(x)` with parameters and buffers taken from `weights` (names as in `state_dict()`).

    Every parameter and buffer must be given, so a missing tensor is an error, not a silent
    fallback to the module's own.
    """
    return functional_call(model, dict(weights), (x,), strict=True)
