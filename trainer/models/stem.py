"""ResNet stems (`sdk.fusion.architecture.topology`). `imagenet`: 7x7 stride-2 conv + 3x3 max-pool (224 px, and
our 64 px benchmark). `small`: 3x3 stride-1 conv, no pool (32 px inputs, CIFAR-style)."""

import torch
from torch import nn

from sdk.fusion.architecture import BN_EPS, STEM_CONV, Conv, MaxPool

from .basic_block import conv2d

STEMS = tuple(STEM_CONV)


class Stem(nn.Module):
    def __init__(self, spec: Conv, pool: MaxPool | None):
        super().__init__()
        self.pool = pool
        self.conv1 = conv2d(spec)
        self.bn1 = nn.BatchNorm2d(spec.out_channels, eps=BN_EPS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        return x if self.pool is None else nn.functional.max_pool2d(x, self.pool.kernel, self.pool.stride,
                                                                     self.pool.padding)
