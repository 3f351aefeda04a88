"""The mapping of ResNet-18 parameters to the 4 mixer blocks: defined once in `sdk.fusion.architecture`
(the runtime needs it without torch) and used from there."""

from sdk.fusion.architecture import NUM_BLOCKS, is_mixed, mixer_block_of, names_by_block

__all__ = ["NUM_BLOCKS", "is_mixed", "mixer_block_of", "names_by_block"]
