"""The ResNet BasicBlock (`sdk.architecture.ResidualBlock`): two 3x3 conv-BN pairs and a shortcut (1x1
conv-BN when the shape changes)."""

import torch
from torch import nn

from sdk.architecture import BN_EPS, Conv, ResidualBlock


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
        shortcut = x if self.downsample is None else self.downsample(x)
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + shortcut)
