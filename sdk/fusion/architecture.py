"""ResNet-18 as data: parameter names and shapes in state-dict order, the mixer-block map, and the
conv/batch-norm pairs. The runtime needs these without torch; the trainer uses the same definitions.

Mixer blocks (alpha is [4, Q], one softmax row per block):
- block 0: `stem.*` (stem conv and its batch norm) and `layer1.*`
- block 1: `layer2.*`
- block 2: `layer3.*`
- block 3: `layer4.*` and `fc.*` (the classifier)
Batch-norm weights, biases and running statistics belong to the block of the conv they follow;
`num_batches_tracked` is a counter, never mixed. The stem goes with the first stage and the classifier
with the last because each is too small for a mixer of its own and acts on that stage's features.

>>> shapes = parameter_shapes(stem="imagenet", width=0.25, num_classes=200)
>>> shapes["layer4.1.conv2.weight"]
(128, 128, 3, 3)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

NUM_BLOCKS = 4
BN_EPS = 1e-5   # every batch norm here (backbone and mixer predictor), in torch, numpy and Java
STAGE_CHANNELS = (64, 128, 256, 512)
_PREFIX_TO_BLOCK = {"stem.": 0, "layer1.": 0, "layer2.": 1, "layer3.": 2, "layer4.": 3, "fc.": 3}
RUNNING_STATS = ("running_mean", "running_var")


def mixer_block_of(name: str) -> int:
    """Mixer block (0..3) of a parameter or buffer name; ValueError for names outside the network."""
    for prefix, block in _PREFIX_TO_BLOCK.items():
        if name.startswith(prefix):
            return block
    raise ValueError(f"{name!r} belongs to no mixer block")


def is_mixed(name: str) -> bool:
    """Whether a state-dict entry is a weight that mixing combines."""
    return not name.endswith("num_batches_tracked")


def is_running_stat(name: str) -> bool:
    return name.endswith(RUNNING_STATS)


def names_by_block(names: Iterable[str]) -> list[list[str]]:
    """Mixed names grouped by block, each group in the given (state-dict) order."""
    groups: list[list[str]] = [[] for _ in range(NUM_BLOCKS)]
    for name in names:
        if is_mixed(name):
            groups[mixer_block_of(name)].append(name)
    return groups


@dataclass(frozen=True)
class Conv:
    """One convolution: its state-dict prefix, channels, square kernel, stride and padding."""
    prefix: str
    in_channels: int
    out_channels: int
    kernel: int
    stride: int = 1
    padding: int = 0

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.out_channels, self.in_channels, self.kernel, self.kernel)

    @property
    def batch_norm(self) -> str:
        return batch_norm_of(self.prefix)


@dataclass(frozen=True)
class ResidualBlock:
    """relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut), the shortcut a 1x1 conv + batch norm
    (`downsample.0`, `downsample.1`) where the shape changes, else x."""
    prefix: str                         # "layer2.0"
    conv1: Conv
    conv2: Conv
    downsample: Conv | None


@dataclass(frozen=True)
class MaxPool:
    """A square max-pool (the imagenet stem's, after its conv, batch norm and relu)."""
    kernel: int
    stride: int
    padding: int


STEM_POOL = MaxPool(3, 2, 1)


@dataclass(frozen=True)
class Topology:
    """ResNet-18 as the one description every implementation builds from (trainer.models.ResNet18,
    trainer.grouped_forward, export.backbone, the shapes below; the Java mirror spells the same)."""
    stem: Conv                          # followed by batch norm `stem.bn1` and relu
    stem_pool: MaxPool | None           # then STEM_POOL for the imagenet stem, none for the small one
    stages: tuple[tuple[ResidualBlock, ...], ...]   # `layer1`..`layer4`
    features: int                       # channels into the classifier `fc` (after global average pooling)

    @property
    def blocks(self) -> list[ResidualBlock]:
        return [b for stage in self.stages for b in stage]

    @property
    def convs(self) -> list[Conv]:
        """Every conv in state-dict order: the stem's, then per block conv1, conv2 and the downsample."""
        return [self.stem] + [c for b in self.blocks for c in (b.conv1, b.conv2, b.downsample) if c is not None]


STEM_CONV = {"imagenet": (7, 2, 3), "small": (3, 1, 1)}   # kernel, stride, padding
BLOCKS_PER_STAGE = (2, 2, 2, 2)
STAGE_STRIDES = (1, 2, 2, 2)


@functools.cache   # a pure function of two settings, asked for on every grouped forward of training
def topology(stem: str, width: float) -> Topology:
    """The network for a stem (`imagenet`: 7x7/2 conv + max-pool; `small`: 3x3/1 conv) and width.

    >>> t = topology("imagenet", 0.25)
    >>> t.stages[1][0].downsample
    Conv(prefix='layer2.0.downsample.0', in_channels=16, out_channels=32, kernel=1, stride=2, padding=0)
    """
    if stem not in STEM_CONV:
        raise ValueError(f"unknown stem {stem!r}; expected one of {tuple(STEM_CONV)}")
    c = [int(ch * width) for ch in STAGE_CHANNELS]
    kernel, stride, padding = STEM_CONV[stem]
    stages, in_c = [], c[0]
    for s, (count, first_stride) in enumerate(zip(BLOCKS_PER_STAGE, STAGE_STRIDES, strict=True)):
        blocks = []
        for i in range(count):
            p, step = f"layer{s + 1}.{i}", first_stride if i == 0 else 1
            shortcut = (Conv(f"{p}.downsample.0", in_c, c[s], 1, step) if step != 1 or in_c != c[s] else None)
            blocks.append(ResidualBlock(p, Conv(f"{p}.conv1", in_c, c[s], 3, step, 1),
                                        Conv(f"{p}.conv2", c[s], c[s], 3, 1, 1), shortcut))
            in_c = c[s]
        stages.append(tuple(blocks))
    pool = STEM_POOL if stem == "imagenet" else None
    return Topology(Conv("stem.conv1", 3, c[0], kernel, stride, padding), pool, tuple(stages), in_c)


CONV_SUFFIXES = ("conv1", "conv2", "downsample.0")   # how every conv prefix ends


def batch_norm_of(conv: str) -> str:
    """The batch norm that follows a conv prefix: conv1 -> bn1, conv2 -> bn2, downsample.0 -> downsample.1."""
    head, _, last = conv.rpartition(".")
    return f"{head}.1" if last == "0" else f"{head}.bn{last[-1]}"


def _bn(prefix: str, c: int) -> dict[str, tuple[int, ...]]:
    return {f"{prefix}.weight": (c,), f"{prefix}.bias": (c,), f"{prefix}.running_mean": (c,),
            f"{prefix}.running_var": (c,), f"{prefix}.num_batches_tracked": ()}


def parameter_shapes(stem: str, width: float, num_classes: int, **_) -> dict[str, tuple[int, ...]]:
    """Every state-dict entry of ResNet-18 (trainer.models.ResNet18) with its shape, in order."""
    net = topology(stem, width)
    shapes: dict[str, tuple[int, ...]] = {}
    for conv in net.convs:
        shapes[f"{conv.prefix}.weight"] = conv.shape
        shapes.update(_bn(conv.batch_norm, conv.out_channels))
    shapes["fc.weight"] = (num_classes, net.features)
    shapes["fc.bias"] = (num_classes,)
    return shapes


def conv_bn_pairs(names: Iterable[str]) -> list[tuple[str, str]]:
    """(conv prefix, batch-norm prefix) for every conv weight among `names`, in their order."""
    prefixes = (name[: -len(".weight")] for name in names if name.endswith(".weight"))
    return [(p, batch_norm_of(p)) for p in prefixes if p.endswith(CONV_SUFFIXES)]


def block_layout(shapes: dict[str, tuple[int, ...]]) -> list[list[str]]:
    """Per block, the order of names in its flat row: learned parameters first, then running statistics."""
    return [[n for n in names if not is_running_stat(n)] + [n for n in names if is_running_stat(n)]
            for names in names_by_block(shapes)]


CHANNEL_PARTS = ("weight", "bias", "running_mean", "running_var")  # a batch norm's per-channel tensors


@dataclass(frozen=True)
class Layer:
    """One unit of mixing and compression: a weight matrix and the per-output-channel tensors that go
    with it (a conv and its batch norm, or the classifier and its bias). A compact bundle stores each
    layer as a shared part plus per-basis deltas, or not at all per basis (`sdk.fusion.bases`).

    >>> layer = mixed_layers(parameter_shapes("small", 0.25, 10))[0]
    >>> layer.name, layer.rows, layer.columns, layer.channels
    ('stem.conv1', 16, 27, ('stem.bn1.weight', 'stem.bn1.bias', 'stem.bn1.running_mean', 'stem.bn1.running_var'))
    """
    name: str                           # conv prefix, or "fc"
    weight: str                         # state-dict name of the weight
    shape: tuple[int, ...]              # its shape; rows = output channels
    channels: tuple[str, ...]           # per-output-channel tensors: batch norm (4) or the classifier bias (1)
    block: int                          # mixer block

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def columns(self) -> int:
        return math.prod(self.shape[1:])

    @property
    def batch_norm(self) -> str | None:
        """The batch-norm prefix folded into this layer, None for the classifier."""
        return self.channels[0][: -len(".weight")] if len(self.channels) == len(CHANNEL_PARTS) else None


def mixed_layers(shapes: Mapping[str, tuple[int, ...]]) -> list[Layer]:
    """Every layer of the network in state-dict order; together they hold every mixed tensor once."""
    layers = [Layer(conv, conv + ".weight", tuple(shapes[conv + ".weight"]),
                    tuple(f"{bn}.{part}" for part in CHANNEL_PARTS), mixer_block_of(conv))
              for conv, bn in conv_bn_pairs(shapes)]
    layers.append(Layer("fc", "fc.weight", tuple(shapes["fc.weight"]), ("fc.bias",), mixer_block_of("fc.weight")))
    covered = {t for layer in layers for t in (layer.weight, *layer.channels)}
    if covered != {n for n in shapes if is_mixed(n)}:
        raise ValueError("the layers do not cover the network's mixed tensors exactly")
    return layers
