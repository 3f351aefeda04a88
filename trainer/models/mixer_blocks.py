"""The mapping of ResNet-18 parameters to the 4 mixer blocks (TAPER's block-wise mixers).

alpha has shape [4, Q]: row b mixes the parameters of block b.
- block 0: `stem.*` (the stem conv and its batch norm) and `layer1.*`
- block 1: `layer2.*`
- block 2: `layer3.*`
- block 3: `layer4.*` and `fc.*` (the classifier)
Batch-norm weights, biases and running statistics belong to the block of the conv they follow.
(`num_batches_tracked` is a counter, not a weight: it is never mixed.)
The stem goes with the first stage and the classifier with the last because each is too small to
deserve a mixer of its own and acts on that stage's features.
"""

from __future__ import annotations

from collections.abc import Iterable

NUM_BLOCKS = 4
_PREFIX_TO_BLOCK = {"stem.": 0, "layer1.": 0, "layer2.": 1, "layer3.": 2, "layer4.": 3, "fc.": 3}


def mixer_block_of(name: str) -> int:
    """Mixer block (0..3) of a parameter or buffer name; ValueError for names outside the network."""
    for prefix, block in _PREFIX_TO_BLOCK.items():
        if name.startswith(prefix):
            return block
    raise ValueError(f"{name!r} belongs to no mixer block")


def is_mixed(name: str) -> bool:
    """Whether a state-dict entry is a weight that mixing combines."""
    return not name.endswith("num_batches_tracked")


def names_by_block(names: Iterable[str]) -> list[list[str]]:
    """Names grouped by block, each group in the given (state-dict) order."""
    groups: list[list[str]] = [[] for _ in range(NUM_BLOCKS)]
    for name in names:
        if is_mixed(name):
            groups[mixer_block_of(name)].append(name)
    return groups
