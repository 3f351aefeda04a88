"""ResNet-18 family, functional forward, and the parameter-to-mixer-block map."""

from .functional import functional_forward
from .mixer_blocks import NUM_BLOCKS, is_mixed, mixer_block_of, names_by_block
from .resnet import ResNet18, ResNetConfig

__all__ = ["NUM_BLOCKS", "ResNet18", "ResNetConfig", "functional_forward", "is_mixed", "mixer_block_of",
           "names_by_block"]
