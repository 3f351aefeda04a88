"""The ResNet BasicBlock (`sdk.fusion.architecture.ResidualBlock`): two 3x3 conv-BN pairs and a shortcut (1x1
conv-BN when the shape changes)."""

from collections.abc import Callable

import torch
from torch import nn

from sdk.fusion.architecture import BN_EPS, Conv, ResidualBlock

Layer = Callable[[torch.Tensor], torch.Tensor]


def residual(x: torch.Tensor, conv1: Layer, conv2: Layer, shortcut: Layer | None) -> torch.Tensor:
    """The one residual forward, relu(conv2(relu(conv1(x))) + shortcut(x)) with an identity shortcut for
    None, each conv with its batch norm (or folded into it). Used by `BasicBlock`, the grouped stage-3
    forward (trainer/grouped_forward.py) and the exporter's folded backbone (export/backbone.py).

    >>> residual(torch.ones(1), lambda t: t * 2, lambda t: t - 3, None).item()   # relu(2 - 3 + 1)
    0.0
    """
    skip = x if shortcut is None else shortcut(x)
    return torch.relu(conv2(torch.relu(conv1(x))) + skip)


def conv2d(spec: Conv, bias: bool = False) -> nn.Conv2d:
    return nn.Conv2d(spec.in_channels, spec.out_channels, spec.kernel, spec.stride, spec.padding, bias=bias)


class BasicBlock(nn.Module):
    def __init__(self, spec: ResidualBlock):
        super().__init__()
        self.conv1 = conv2d(spec.conv1)
        self.bn1 = nn.BatchNorm2d(spec.conv1.out_channels, eps=BN_EPS)
        self.conv2 = conv2d(spec.conv2)
        self.bn2 = nn.BatchNorm2d(spec.conv2.out_channels, eps=BN_EPS)
        self.downsample = None
        if spec.downsample is not None:
            self.downsample = nn.Sequential(conv2d(spec.downsample),
                                            nn.BatchNorm2d(spec.downsample.out_channels, eps=BN_EPS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return residual(x, lambda t: self.bn1(self.conv1(t)), lambda t: self.bn2(self.conv2(t)), self.downsample)
