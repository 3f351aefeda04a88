"""Fusion and folding in one pass: a personalization's weights written into a route's buffer, straight
from the compact bases (`sdk.fusion.bases`).

Per conv layer, the mixed weight W_0 + sum_q alpha_q D_q is computed in tiles of whole output-channel
blocks, in the buffer's own layout (plain [O, I, kh, kw], or onnxruntime's blocked NCHWc layout on the
compiled route: `Placement`), and each tile is scaled by its batch norm right after, while it is in
cache (full-width ResNet-18, Q=10 full bases: fuse+fold 31.6 vs 35.1 ms for fuse then fold; ad-hoc
A/B, interleaved). What a tile costs depends on how the layer is stored:

- `full`/`dense`: one GEMV over the tile's [Q, n] deltas (float16 ones are first widened into a
  scratch tile: numpy has no half-precision GEMV).
- `int8`: the int8 tile widened, one GEMV, then its per-output-channel scale.
- `lowrank`: (alpha * U) [O_t, Q r] times V [Q r, n] (one GEMM; V's columns pre-permuted into the
  blocked order, so the product lands where the session reads it; the C kernel computes it per lane
  instead: `sdk.fusion.native`), plus W_0.
- `subspace`: the same with (sum_q alpha_q U_q) [O_t, r] times the shared V [r, n]: Q times less work.
- `shared`: nothing at all. The folded weight does not depend on alpha, so it is written once into each
  new buffer and personalize() never touches it again.

The classifier is fused in plain layout beside the graph's weights (the head rows are picked from it).
`FusionPlan.fuse_and_fold` is checked against the reference `CompactBases.mixed` + `fold_batch_norm`
in tests/test_fusion.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from sdk.fusion.architecture import BN_EPS, Layer
from sdk.fusion.bases import RANKED_KINDS, CompactBases, LayerBases

ALIGN_FLOATS = 16
# Inputs start on 64-byte boundaries: MLAS convolutions ran 17% slower on weights that did not
# (full-width ResNet-18 at 224 px: 20.1 vs 17.1 ms per image, measured with the inputs unaligned).
TILE_FLOATS = 1 << 18   # ~1 MB of output per tile (2^17: 29.97 vs 32.54 ms, 2^20: 34.3 vs 37.3; ad-hoc A/B)


@dataclass(frozen=True)
class Placement:
    """Where one tensor lies in a flat float32 buffer: as is, or with `view` = (split shape, axes), as
    the tensor reshaped to the split shape and transposed by axes (a blocked NCHWc conv weight)."""
    name: str
    shape: tuple[int, ...]
    start: int                          # first element in the buffer
    view: tuple[tuple[int, ...], tuple[int, ...]] | None = None   # (split shape, axes)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def view_of(self, dest: np.ndarray) -> np.ndarray:
        """The elements of `dest` that hold this tensor, indexed like the tensor (a strided view for a
        blocked layout: writing to it writes the blocked order)."""
        out = dest[self.start:self.start + self.size]
        if self.view is None:
            return out.reshape(self.shape)
        split, axes = self.view
        return out.reshape([split[a] for a in axes]).transpose(np.argsort(axes))

    def in_layout(self, source: np.ndarray) -> np.ndarray:
        """`source` (the tensor's own index order) as a view in this placement's memory order (inverse of
        `view_of`); for a blocked layout, axis 0 is the output-channel blocks."""
        if self.view is None:
            return source.reshape(self.shape)
        split, axes = self.view
        return source.reshape(split).transpose(axes)

    def channel_blocks(self) -> tuple[int, int] | None:
        """(blocks, block): output channels outermost in blocks of `block`, the block innermost (1 in
        the plain layout, and in a plain one whose other axes are permuted, as ExecuTorch's channels-last
        [O, H, W, I]); None for a layout where that is not so."""
        if self.view is None:
            return self.shape[0], 1
        split, axes = self.view
        if len(split) == len(self.shape):   # a permutation of the axes, no channel split
            return (self.shape[0], 1) if axes[0] == 0 else None
        return (split[0], split[1]) if axes[0] == 0 and axes[-1] == 1 else None


def aligned(count: int) -> int:
    return -(-count // ALIGN_FLOATS) * ALIGN_FLOATS


def aligned_zeros(count: int) -> np.ndarray:
    """float32 zeros whose first element is 64-byte aligned."""
    raw = np.zeros(count + ALIGN_FLOATS, np.float32)
    skip = (-raw.ctypes.data % (4 * ALIGN_FLOATS)) // 4
    return raw[skip:skip + count]


@dataclass
class WeightBuffer:
    """One personalization's weights: `data` holds the graph's folded weights (`graph_data`, what the
    session reads) and then the classifier (`head`: fused, unfolded); `feeds` are the compiled graph's
    inputs (None on the standard route). `scratch` is where float16 and int8 tiles are widened."""
    data: np.ndarray
    graph_data: np.ndarray
    head: tuple[np.ndarray, np.ndarray]
    scratch: np.ndarray
    owner: object                       # the route whose layout this is
    feeds: dict[str, np.ndarray] | None = None
    in_use: bool = False                # given to a model (compiled route)


def batch_norm_scale_shift(channels: np.ndarray, eps: float = BN_EPS) -> tuple[np.ndarray, np.ndarray]:
    """A batch norm's [4, O] (weight, bias, running mean, running variance) at inference as
    y = x * scale + shift, per channel."""
    weight, bias, mean, var = channels
    scale = weight / np.sqrt(var + np.float32(eps))
    return scale, bias - mean * scale


@dataclass(frozen=True)
class Tile:
    """Output-channel blocks [first, stop) of one layer, at `start` in the buffer, with what its fusion
    reads: `base` (W_0 in the buffer's order, or None), `deltas` ([Q, n] in the buffer's order: float32,
    float16 or int8), or for low rank `u` ([Q, rows, r]: the tile's output channels)."""
    start: int
    first: int
    stop: int
    size: int
    base: np.ndarray | None
    deltas: np.ndarray | None = None
    u: np.ndarray | None = None


@dataclass
class LayerPlan:
    """How one layer is fused into a buffer: its tiles, and for folding its channel-block layout."""
    bases: LayerBases
    weight: Placement                   # in the buffer
    bias: Placement | None              # the folded conv bias (None for the classifier)
    blocks: int
    block: int
    tiles: list[Tile]
    v: np.ndarray | None = None         # low rank, plain layout: V [k, n]
    vt: np.ndarray | None = None        # low rank, blocked layout: V transposed [n, k], its rows in the
                                        # block's element order (row j: the k values element j needs)
    int8_scale: np.ndarray | None = None

    def left_factor(self, u: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        """The left factor [rows, k] of the mixed delta for a tile's u [Q, rows, r]: the bases' U side by
        side, each scaled by its alpha (`lowrank`, k = Q r), or their alpha-weighted sum (`subspace`,
        k = r: V is shared)."""
        if self.bases.kind == "subspace":
            return np.tensordot(alpha, u.astype(np.float32), axes=1)
        return (u.astype(np.float32) * alpha[:, None, None]).transpose(1, 0, 2).reshape(u.shape[1], -1)

    @property
    def layer(self) -> Layer:
        return self.bases.layer

    @property
    def slab(self) -> int:
        return self.weight.size // self.blocks

    @property
    def inner(self) -> int:
        """Elements per innermost run of `pattern`: the block's channels repeated up to 256 elements, so
        numpy's inner loop is long (an inner loop of 8 made folding 1.6x slower)."""
        return math.gcd(self.slab // self.block, max(1, 256 // self.block)) * self.block

    def pattern(self, scale: np.ndarray) -> np.ndarray:
        """A per-output-channel `scale` as [blocks, 1, inner], to multiply a tile viewed as
        [blocks, -1, inner]."""
        repeat = self.inner // self.block
        return np.tile(scale.reshape(self.blocks, 1, self.block), (1, repeat, 1)).reshape(self.blocks, 1, -1)


@dataclass
class FusionPlan:
    """The bases laid out for one buffer layout: per layer its tiles (built once: at load for the plain
    layout, at warm-up for the compiled one), and the folded weights of shared layers, written into
    every new buffer once."""
    num_bases: int
    graph_floats: int
    layers: list[LayerPlan]
    head: tuple[Placement, Placement]   # fc.weight and fc.bias after the graph's weights
    kernel: FusionKernel
    constants: list[tuple[int, np.ndarray]] = field(default_factory=list)   # (start, values in memory order)
    scratch_floats: int = 0
    size: int = 0
    prepared: object = None             # the kernel's own form of the plan (`FusionKernel.prepare`)

    @classmethod
    def build(cls, bases: CompactBases, placements: dict[str, Placement], graph_floats: int,
              kernel: FusionKernel | None = None, tile_floats: int | None | str = "kernel") -> FusionPlan:
        """Tiles for a buffer whose graph weights lie at `placements` (folded conv weights and biases) in
        its first `graph_floats` floats, fused by `kernel` (default: numpy). tile_floats: the kernel's
        choice by default; None: one tile per layer, reading the bundle's arrays in place when they are
        already in the buffer's order (the plain layout). ValueError if a weight's placement is not
        output-channel blocks."""
        kernel = kernel or NUMPY
        if tile_floats == "kernel":
            tile_floats = kernel.tile_floats
        fc = bases.classifier
        cursor = aligned(graph_floats)
        head = (Placement("fc.weight", fc.layer.shape, cursor),
                Placement("fc.bias", (fc.layer.rows,), aligned(cursor + math.prod(fc.layer.shape))))
        plan = cls(bases.num_bases, graph_floats, [], head, kernel)
        for lb in bases.layers:
            conv = lb.layer.batch_norm is not None
            weight = placements[lb.layer.weight] if conv else head[0]
            layout = weight.channel_blocks()
            if layout is None:
                raise ValueError(f"{weight.name}: its layout is not output-channel blocks")
            bias = placements[lb.layer.name + ".bias"] if conv else None
            if lb.kind == "shared" and conv:
                plan.constants += _folded_constants(lb, weight, bias)
                continue
            plan.layers.append(_layer_plan(lb, bases.num_bases, weight, bias, layout, tile_floats))
        plan.scratch_floats = kernel.scratch_floats(plan.layers)
        plan.size = aligned(head[1].start + head[1].size)
        plan.prepared = kernel.prepare(plan)
        return plan

    def new_buffer(self, owner: object, template: bytes | None = None) -> WeightBuffer:
        """A buffer with the shared layers written; `template`: bytes its graph part starts from (the
        ExecuTorch program the weights are fused into, `sdk.engines.executorch`)."""
        data = aligned_zeros(self.size)
        if template is not None:
            data[:self.graph_floats].view(np.uint8)[:len(template)] = np.frombuffer(template, np.uint8)
        for start, values in self.constants:
            data[start:start + values.size] = values
        head = (self.head[0].view_of(data), self.head[1].view_of(data))
        return WeightBuffer(data, data[:self.graph_floats], head,
                            np.empty(self.scratch_floats, np.float32), owner)

    def fuse_and_fold(self, alpha: np.ndarray, target: WeightBuffer, prepared: object = None) -> None:
        """target <- the weights mixed with alpha [4, Q], batch norm folded into the convs (shared layers
        were written when the buffer was made); `prepared`: the kernel's other form of this plan, one that
        also writes int8 weights (`NativeKernel.quantizing`)."""
        if prepared is None:
            self.kernel.fuse_and_fold(self, np.asarray(alpha, np.float32), target)
        else:
            self.kernel.fuse_and_fold(self, np.asarray(alpha, np.float32), target, prepared=prepared)


def _folded_constants(lb: LayerBases, weight: Placement, bias: Placement) -> list[tuple[int, np.ndarray]]:
    """A shared layer's folded weight and bias, in the buffer's memory order."""
    scale, shift = batch_norm_scale_shift(lb.parts["channels"][0])
    folded = (lb.base() * scale[:, None]).reshape(lb.layer.shape)
    return [(weight.start, np.ascontiguousarray(weight.in_layout(folded)).reshape(-1)), (bias.start, shift)]


def _in_order(p: Placement, source: np.ndarray) -> np.ndarray:
    """Per-basis tensors [Q, O, n] -> [Q, size] in `p`'s memory order (a copy unless already so). Each
    basis is transposed straight into its row: stacking transposed copies held the bases twice at once
    (468 MB more at the peak for full-width float32 bases)."""
    if p.view is None:
        return source.reshape(len(source), -1)
    out = np.empty((len(source), p.size), source.dtype)
    for row, basis in zip(out, source, strict=True):
        ordered = p.in_layout(basis.reshape(p.shape))
        row.reshape(ordered.shape)[...] = ordered
    return out


def _layer_plan(lb: LayerBases, num_bases: int, weight: Placement, bias: Placement | None,
                layout: tuple[int, int], tile_floats: int | None) -> LayerPlan:
    blocks, block = layout
    plan = LayerPlan(lb, weight, bias, blocks, block, [])
    parts, q = lb.parts, num_bases
    base = None if lb.kind == "full" else _in_order(weight, parts["base"][None])[0]
    deltas = None
    if lb.kind in ("full", "dense", "int8"):
        deltas = _in_order(weight, parts["weight" if lb.kind == "full" else "delta"])
    if lb.kind == "int8":
        plan.int8_scale = parts["scale"]
    if lb.kind in RANKED_KINDS:
        v = parts["v"].astype(np.float32).reshape(-1, lb.layer.columns)   # [Q r, n] (lowrank) or [r, n] (subspace)
        if block > 1:
            order = weight.in_layout(np.arange(weight.size).reshape(weight.shape))[0][..., 0].reshape(-1)
            plan.vt = np.ascontiguousarray(v[:, order].T)                 # its rows in the blocked order
        elif weight.view is not None:   # plain with permuted axes: V's columns in channel 0's element order
            order = weight.in_layout(np.arange(weight.size).reshape(weight.shape))[0].reshape(-1)
            plan.v = np.ascontiguousarray(v[:, order])
        else:
            plan.v = v
    slab = plan.slab
    widened = deltas is not None and deltas.dtype != np.float32
    step = blocks if tile_floats is None else max(1, (tile_floats // (q if widened else 1)) // slab)
    for first in range(0, blocks, step):
        stop = min(first + step, blocks)
        cut = slice(first * slab, stop * slab)
        whole = first == 0 and stop == blocks
        plan.tiles.append(Tile(
            weight.start + first * slab, first, stop, (stop - first) * slab,
            None if base is None else base if whole else np.ascontiguousarray(base[cut]),
            None if deltas is None else deltas if whole else np.ascontiguousarray(deltas[:, cut]),
            None if lb.kind not in RANKED_KINDS else parts["u"][:, first * block:stop * block]))
    return plan


def write_channels(plan: LayerPlan, alpha: np.ndarray, target: WeightBuffer) -> np.ndarray | None:
    """Mix a layer's per-channel tensors with alpha [Q]; write its folded conv bias (or the classifier's
    bias) into `target`, and return the per-output-channel scale its weight is folded with (None for the
    classifier)."""
    stored = plan.bases.parts["channels"]
    channels = stored[0] if plan.bases.kind == "shared" else np.dot(alpha, stored.reshape(len(alpha), -1)).reshape(
        stored.shape[1:])
    if plan.bias is None:
        target.head[1][...] = channels[0]
        return None
    scale, shift = batch_norm_scale_shift(channels)
    target.data[plan.bias.start:plan.bias.start + plan.bias.size] = shift
    return scale


class NumpyKernel:
    """Fusion in numpy, tile by tile (each tile's passes stay in cache): a GEMV, then the int8 scale, W_0
    and the fold as separate passes. The reference for `sdk.fusion.native`, and the fallback."""
    name = "numpy"
    tile_floats: int | None = TILE_FLOATS

    def scratch_floats(self, layers: list[LayerPlan]) -> int:
        return max([t.deltas.size for p in layers for t in p.tiles if t.deltas is not None
                    and t.deltas.dtype != np.float32] or [0])

    def prepare(self, plan: FusionPlan) -> None:
        return None

    def fuse_and_fold(self, plan: FusionPlan, alpha: np.ndarray, target: WeightBuffer) -> None:
        for layer in plan.layers:
            block_alpha = np.ascontiguousarray(alpha[layer.layer.block])
            self.fuse_layer(layer, block_alpha, write_channels(layer, block_alpha, target), target)

    def fuse_layer(self, plan: LayerPlan, alpha: np.ndarray, fold: np.ndarray | None, target: WeightBuffer) -> None:
        pattern = None if fold is None else plan.pattern(fold)
        int8 = None if plan.int8_scale is None else plan.pattern(plan.int8_scale)
        for tile in plan.tiles:
            out = target.data[tile.start:tile.start + tile.size]
            if tile.u is not None:
                _low_rank(plan, tile, alpha, out)
            elif tile.deltas is None:  # a shared classifier (shared convs have no plan): W_0 alone
                out[...] = tile.base
                continue
            else:
                deltas = tile.deltas
                if deltas.dtype != np.float32:
                    widened = target.scratch[:deltas.size].reshape(deltas.shape)
                    widened[...] = deltas
                    deltas = widened
                np.dot(alpha, deltas, out=out)
            view = out.reshape(tile.stop - tile.first, -1, plan.inner)
            if int8 is not None:
                np.multiply(view, int8[tile.first:tile.stop], out=view)
            if tile.base is not None:
                np.add(out, tile.base, out=out)
            if pattern is not None:
                np.multiply(view, pattern[tile.first:tile.stop], out=view)


class FusionKernel(Protocol):
    """Writes a plan's fused, folded weights and biases into a buffer for alpha [4, Q] (`fuse_and_fold`).
    `tile_floats` is the tile size it wants (None: one tile per layer); `prepare(plan)` gives what it keeps
    of a plan (`FusionPlan.prepared`), once per plan."""
    name: str
    tile_floats: int | None

    def scratch_floats(self, layers: list[LayerPlan]) -> int: ...

    def prepare(self, plan: FusionPlan) -> object: ...

    def fuse_and_fold(self, plan: FusionPlan, alpha: np.ndarray, target: WeightBuffer) -> None: ...


NUMPY = NumpyKernel()


def _low_rank(plan: LayerPlan, tile: Tile, alpha: np.ndarray, out: np.ndarray) -> None:
    """out <- sum_q alpha_q U_q V_q for the tile's output channels, in the buffer's order."""
    a = plan.left_factor(tile.u, alpha)                          # [rows, k]
    rows = len(a)
    if plan.block == 1:
        np.dot(a, plan.v, out=out.reshape(rows, -1))
    else:  # per channel block: [n, k] @ [k, block] is the block's memory order, [n, block]
        blocks = tile.stop - tile.first
        np.matmul(plan.vt, a.reshape(blocks, plan.block, -1).transpose(0, 2, 1),
                  out=out.reshape(blocks, -1, plan.block))


def blocked_views(shape: tuple[int, ...]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Candidate reorders of a conv weight [O, I, kh, kw] into the MLAS NCHWc layouts, block 8 or 16:
    OIhw -> (O/B)(I/B)hw(Bi)(Bo), and OIhw -> (O/B)Ihw(Bo) for convs reading plain NCHW input."""
    if len(shape) != 4:
        return []
    o, i, kh, kw = shape
    out = []
    for b in (8, 16):
        if o % b == 0 and i % b == 0:
            out.append(((o // b, b, i // b, b, kh, kw), (0, 2, 4, 5, 3, 1)))
        if o % b == 0:
            out.append(((o // b, b, i, kh, kw), (0, 2, 3, 4, 1)))
    return out
