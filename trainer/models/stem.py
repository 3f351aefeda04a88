"""ResNet stems. `imagenet`: 7x7 stride-2 conv + 3x3 max-pool (224 px, and our 64 px benchmark).
`small`: 3x3 stride-1 conv, no pool (32 px inputs, CIFAR-style)."""

import torch
from torch import nn

STEMS = ("imagenet", "small")


class Stem(nn.Module):
    def __init__(self, kind: str, out_channels: int):
        super().__init__()
        if kind not in STEMS:
            raise ValueError(f"unknown stem {kind!r}; expected one of {STEMS}")
        self.kind = kind
        if kind == "imagenet":
            self.conv1 = nn.Conv2d(3, out_channels, 7, 2, 3, bias=False)
        else:
            self.conv1 = nn.Conv2d(3, out_channels, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        if self.kind == "imagenet":
            x = nn.functional.max_pool2d(x, 3, 2, 1)
        return x
