"""ResNet-18 (BasicBlock, [2, 2, 2, 2]; `sdk.fusion.architecture.topology`) with a choice of stem, a width
multiplier and any number of classes.

Parameter names: `stem.conv1`, `stem.bn1`, `layer1`..`layer4` (two BasicBlocks each), `fc`.

>>> model = ResNet18(ResNetConfig(stem="imagenet", width=0.25, num_classes=200))
>>> model(torch.zeros(2, 3, 64, 64)).shape
torch.Size([2, 200])
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from sdk.format.manifest import WIDTHS
from sdk.fusion.architecture import STAGE_CHANNELS, topology

from .basic_block import BasicBlock
from .stem import STEMS, Stem


@dataclass(frozen=True)
class ResNetConfig:
    stem: str = "imagenet"
    width: float = 1.0
    num_classes: int = 1000
    input_size: int = 224

    def __post_init__(self):
        if self.stem not in STEMS:
            raise ValueError(f"stem must be one of {STEMS}, got {self.stem!r}")
        if self.width not in WIDTHS:
            raise ValueError(f"width must be one of {WIDTHS}, got {self.width}")
        if self.num_classes < 1 or self.input_size < 8:
            raise ValueError("num_classes must be >= 1 and input_size >= 8")

    @property
    def channels(self) -> tuple[int, ...]:
        return tuple(int(c * self.width) for c in STAGE_CHANNELS)

    def to_dict(self) -> dict:
        return asdict(self)


class ResNet18(nn.Module):
    def __init__(self, config: ResNetConfig):
        super().__init__()
        self.config = config
        net = topology(config.stem, config.width)
        self.stem = Stem(net.stem, net.stem_pool)
        self.layer1, self.layer2, self.layer3, self.layer4 = (nn.Sequential(*map(BasicBlock, stage))
                                                              for stage in net.stages)
        self.fc = nn.Linear(net.features, config.num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        # Zero-init the last BN of each residual branch: each block starts as identity (Goyal et al.).
        for layer in (self.layer1, self.layer2, self.layer3, self.layer4):
            for block in layer:
                nn.init.zeros_(block.bn2.weight)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))
