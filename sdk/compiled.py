"""The backbone graph compiled once for this device, so personalizing creates no session at all.

At full optimization onnxruntime rewrites the backbone for the CPU (NCHWc blocked convolutions) and
reorders every conv weight into the blocked layout when a session is created: ~2/3 of session time.
That work depends on the graph and the CPU, not on the weights, so it is done once: onnxruntime
saves its optimized graph, and two *probe* weight files tell where each of our weights lands in the
optimized graph's weight file (probe A holds each element's index + 1, probe B its negation; an
element equal in both is a constant of the optimized graph, such as alignment padding).

The optimized graph's copies of our weights then become graph inputs (`sdk.onnx_proto`), so one
session serves every personalized model, each feeding its own weights, already in the blocked layout
(unlike inputs of the plain graph, which cost 35-45% latency because nothing reorders them ahead of
time). And the bases are reordered once into that layout (`DeviceBases`): GEMVs write the fused conv
weights where the session reads them, and batch norm is folded in as a per-channel scale tile by tile.
`compile_backbone` returns None when anything is unexpected (a reorder that is not a known blocked
transpose, padding, dropped elements, weights shared between tensors), so the caller keeps the
standard route.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnxruntime as ort

from .architecture import conv_bn_pairs
from .folding import batch_norm_scale_shift
from .fusion import WeightBuffer
from .onnx_proto import initializers, initializers_to_inputs

EXACT_FLOAT_INTEGERS = 2 ** 24   # probe indices must be exact in float32
COMPILED_FILE = "compiled.weights"
# Inputs start on 64-byte boundaries: MLAS convolutions ran 17% slower on weights that did not
# (full-width ResNet-18 at 224 px: 20.1 vs 17.1 ms per image, measured with the inputs unaligned).
ALIGN_FLOATS = 16
TILE_FLOATS = 1 << 18   # conv weights are fused and folded in tiles of ~1 MB (see DeviceBases)


@dataclass(frozen=True)
class Placement:
    """Where one source tensor goes in a flat float32 buffer (the optimized graph's weight file, or a
    device buffer): copied as is, or, with `view` = (split shape, axes), as the source reshaped to the
    split shape and transposed by axes (a blocked NCHWc conv weight)."""
    name: str
    shape: tuple[int, ...]
    start: int                          # first element in the buffer
    view: tuple[tuple[int, ...], tuple[int, ...]] | None = None   # (split shape, axes)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def view_of(self, dest: np.ndarray) -> np.ndarray:
        """The elements of `dest` that hold this tensor, indexed like the source: shape `shape`, or the
        split shape for a blocked layout (a strided view: writing to it writes the compiled order)."""
        out = dest[self.start:self.start + self.size]
        if self.view is None:
            return out.reshape(self.shape)
        split, axes = self.view
        return out.reshape([split[a] for a in axes]).transpose(np.argsort(axes))

    def in_layout(self, source: np.ndarray) -> np.ndarray:
        """The tensor `source` (its own index order) as a view in this placement's memory order: the
        inverse of `view_of`; for a blocked layout, axis 0 is the output-channel blocks."""
        if self.view is None:
            return source.reshape(self.shape)
        split, axes = self.view
        return source.reshape(split).transpose(axes)


@dataclass
class CompiledBackbone:
    graph: bytes                        # onnxruntime's optimized graph, our folded weights as graph inputs
    constants: np.ndarray               # its weight file, for the initializers that stay (ours zeroed)
    placements: list[Placement]         # each folded weight in the optimized weight file (from the probes)
    inputs: dict[str, tuple[str, tuple[int, ...]]]   # folded weight -> (graph input, its shape)


def _aligned(count: int) -> int:
    return -(-count // ALIGN_FLOATS) * ALIGN_FLOATS


def aligned_zeros(count: int) -> np.ndarray:
    """float32 zeros whose first element is 64-byte aligned."""
    raw = np.zeros(count + ALIGN_FLOATS, np.float32)
    skip = (-raw.ctypes.data % (4 * ALIGN_FLOATS)) // 4
    return raw[skip:skip + count]


@dataclass(frozen=True)
class ConvTile:
    """Whole output-channel blocks [first, stop) of one conv weight as it lies in a device buffer (from
    `start`), and their bases as a contiguous [Q, n] matrix: one GEMV fuses them, then folding scales
    them while they are still in cache."""
    block: int                          # mixer block
    conv: str                           # conv prefix (its weight is `conv + ".weight"`)
    start: int
    first: int
    stop: int
    bases: np.ndarray


@dataclass(frozen=True)
class ConvFold:
    """A conv weight in a device buffer seen as [channel blocks, rest, block]: output channels split
    into blocks of `block` (the NCHWc block; 1 in the plain layout) with the block innermost, so one
    block's scale is a short vector repeated along its slab."""
    bn: str
    blocks: int
    block: int
    slab: int                           # elements per channel block

    def scale_pattern(self, scale: np.ndarray) -> np.ndarray:
        """The per-output-channel `scale` as [blocks, 1, inner] to multiply a tile viewed as
        [blocks, -1, inner]; inner repeats the block's scale up to 256 elements, so numpy's inner loop
        is long (an inner loop of 8 made folding 1.6x slower)."""
        repeat = math.gcd(self.slab // self.block, max(1, 256 // self.block))
        return np.tile(scale.reshape(self.blocks, 1, self.block), (1, repeat, 1)).reshape(self.blocks, 1, -1)


@dataclass
class DeviceBases:
    """The bases reordered once for the compiled graph, so that fusing writes every weight where the
    session reads it. A device buffer holds, per mixer block, the block's batch-norm and classifier
    parameters (one contiguous row: `params_rows`, fused by one GEMV), then its conv weights in their
    blocked layout, each at a 64-byte aligned start; then the folded conv biases.

    Conv weights are fused in tiles of whole output-channel blocks (`tiles`, ~1 MB each) and each tile
    is folded (scaled per output channel) right after its GEMV, while it is in cache: one pass over
    memory instead of fuse then fold (full-width ResNet-18: fuse+fold 31.6 vs 35.1 ms, tiles of
    2^18 floats; ad-hoc A/B, interleaved).

    A full copy of the bases in memory (468 MB for a full-width ResNet-18 with Q=10), instead of
    reading the memory-mapped bundle: the price of fusing straight into the session's layout."""
    params_rows: list[tuple[int, np.ndarray]]   # per mixer block: (start, [Q, n] bases)
    tiles: list[ConvTile]
    folds: dict[str, ConvFold]          # conv prefix -> its layout for folding
    size: int                           # floats in a device buffer
    placements: dict[str, Placement]    # folded weights: start in a device buffer
    params: dict[str, tuple[int, tuple[int, ...]]]   # batch norm and classifier parameters: (start, shape)
    inputs: dict[str, tuple[str, tuple[int, ...]]]

    def new_buffer(self) -> WeightBuffer:
        data = aligned_zeros(self.size)
        params = {name: data[s:s + int(np.prod(shape, dtype=np.int64))].reshape(shape)
                  for name, (s, shape) in self.params.items()}
        folded = {name: p.view_of(data) for name, p in self.placements.items()}
        feeds = {graph_name: data[self.placements[name].start:self.placements[name].start
                                  + self.placements[name].size].reshape(shape)
                 for name, (graph_name, shape) in self.inputs.items()}
        return WeightBuffer([], params, folded, data, feeds, self)

    def fuse_and_fold(self, alpha: np.ndarray, target: WeightBuffer) -> None:
        """target <- the weights mixed with alpha [4, Q], batch norm folded into the convs."""
        data = target.data
        for block, (start, bases) in enumerate(self.params_rows):
            np.dot(alpha[block], bases, out=data[start:start + bases.shape[1]])
        patterns = {}
        for conv, fold in self.folds.items():
            scale, shift = batch_norm_scale_shift(target.params, fold.bn)
            target.folded[conv + ".bias"][...] = shift
            patterns[conv] = fold.scale_pattern(scale)
        for tile in self.tiles:
            out = data[tile.start:tile.start + tile.bases.shape[1]]
            np.dot(alpha[tile.block], tile.bases, out=out)
            pattern = patterns[tile.conv][tile.first:tile.stop]
            view = out.reshape(tile.stop - tile.first, -1, pattern.shape[-1])
            np.multiply(view, pattern, out=view)


def _channel_blocks(p: Placement) -> tuple[int, int] | None:
    """(channel blocks, block) of a conv weight's layout: output channels outermost in blocks, the block
    innermost; None for another layout."""
    if p.view is None:
        return p.shape[0], 1
    split, axes = p.view
    return (split[0], split[1]) if axes[0] == 0 and axes[-1] == 1 else None


def _conv_tiles(block: int, conv: str, p: Placement, slab: int, bases: np.ndarray, tile_floats: int
                ) -> list[ConvTile]:
    """A conv weight's bases ([Q, size], source order) in its device layout, cut into tiles of whole
    channel blocks (`slab` elements each) of up to `tile_floats` elements."""
    in_layout = [p.in_layout(b) for b in bases]
    step, tiles = max(1, tile_floats // slab), []
    for first in range(0, p.size // slab, step):
        stop = min(first + step, p.size // slab)
        tile = np.empty((len(bases), (stop - first) * slab), np.float32)
        for row, basis in zip(tile, in_layout, strict=True):
            row.reshape(basis[first:stop].shape)[...] = basis[first:stop]
        tiles.append(ConvTile(block, conv, p.start + first * slab, first, stop, tile))
    return tiles


def reorder_bases(compiled: CompiledBackbone, bases: list[np.ndarray], block_layout: list[list[str]],
                  shapes: dict[str, tuple[int, ...]], tile_floats: int = TILE_FLOATS) -> DeviceBases | None:
    """`bases[b]` ([Q, P_b], names in `block_layout[b]` order) reordered for the device; None if a conv
    weight's layout is not one `ConvFold` describes or a conv has no batch norm."""
    folded = {p.name: p for p in compiled.placements}
    batch_norms = dict(conv_bn_pairs(shapes))
    params_rows, tiles, folds, placements, params, cursor = [], [], {}, {}, {}, 0
    for block, (base, names) in enumerate(zip(bases, block_layout, strict=True)):
        columns, offset = {}, 0
        for name in names:
            size = int(np.prod(shapes[name], dtype=np.int64))
            columns[name], offset = slice(offset, offset + size), offset + size
        cursor = _aligned(cursor)
        others = [n for n in names if n not in folded]
        params_rows.append((cursor, np.concatenate([base[:, columns[n]] for n in others], axis=1)))
        for name in others:
            params[name] = (cursor, tuple(shapes[name]))
            cursor += columns[name].stop - columns[name].start
        for name in (n for n in names if n in folded):
            conv, layout = name[:-len(".weight")], _channel_blocks(folded[name])
            if layout is None or conv not in batch_norms:
                return None
            cursor = _aligned(cursor)
            p = placements[name] = replace(folded[name], start=cursor)
            folds[conv] = ConvFold(batch_norms[conv], layout[0], layout[1], p.size // layout[0])
            tiles += _conv_tiles(block, conv, p, folds[conv].slab, base[:, columns[name]], tile_floats)
            cursor += p.size
    for name, p in folded.items():
        if name not in placements:  # conv biases: made by folding, not fused
            cursor = _aligned(cursor)
            placements[name] = replace(p, start=cursor)
            cursor += p.size
    return DeviceBases(params_rows, tiles, folds, _aligned(cursor), placements, params, compiled.inputs)


def _optimize(graph: bytes, external_file: str, weights: np.ndarray) -> tuple[bytes, np.ndarray]:
    """onnxruntime's fully optimized graph and its weight file for these weights."""
    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.optimized_model_filepath = str(Path(tmp) / "compiled.onnx")
        options.add_session_config_entry("session.optimized_model_external_initializers_file_name", COMPILED_FILE)
        options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "0")
        options.log_severity_level = 3  # it warns that the graph is CPU specific: that is the point
        raw = weights.view(np.uint8)
        options.add_external_initializers_from_files_in_memory([external_file], [raw], [raw.nbytes])
        ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        data = (Path(tmp) / COMPILED_FILE).read_bytes()
        return (Path(tmp) / "compiled.onnx").read_bytes(), np.frombuffer(data + b"\0" * (-len(data) % 4), np.float32)


def _blocked_views(shape: tuple[int, ...]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
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


def _placement(name: str, shape: tuple[int, ...], positions: np.ndarray, sources: np.ndarray) -> Placement | None:
    """How a tensor's elements (at consecutive `positions`, holding its elements `sources`) are laid out;
    None if not as they are or as a blocked transpose."""
    size = int(np.prod(shape, dtype=np.int64))
    if len(positions) != size:
        return None  # padded or partly dropped
    start = int(positions[0])
    if np.array_equal(sources, np.arange(size)):
        return Placement(name, shape, start)
    for split, axes in _blocked_views(shape):
        if np.array_equal(np.arange(size).reshape(split).transpose(axes).reshape(-1), sources):
            return Placement(name, shape, start, view=(split, axes))
    return None


def compile_backbone(graph: bytes, external_file: str, layout: dict[str, dict], external_size: int
                     ) -> CompiledBackbone | None:
    """Compile the backbone for this CPU; None if its optimized form is not our weights, each as is or as a
    blocked transpose.
    (The engine also checks a compiled session against a standard one before using it.)"""
    count = external_size // 4
    if count >= EXACT_FLOAT_INTEGERS:
        return None
    probe = np.arange(1, count + 1, dtype=np.float32)
    compiled_graph, a = _optimize(graph, external_file, probe)
    _, b = _optimize(graph, external_file, -probe)
    if len(a) != len(b):
        return None
    from_weights = a != b
    if not np.array_equal(a[from_weights], -b[from_weights]):
        return None
    constants = np.where(from_weights, 0, a).astype(np.float32)
    source = a.astype(np.int64) - 1            # global element index in our layout, per compiled element
    positions = np.flatnonzero(from_weights)
    names = sorted(layout, key=lambda n: layout[n]["offset"])
    firsts = np.array([layout[n]["offset"] // 4 for n in names])
    owner = np.searchsorted(firsts, source[positions], side="right") - 1   # tensor of each element
    # Runs of consecutive compiled elements that belong to one tensor; each tensor must be one run.
    breaks = np.flatnonzero((np.diff(owner) != 0) | (np.diff(positions) != 1)) + 1
    runs = np.split(np.arange(len(positions)), breaks)
    if len(runs) != len(names) or len({int(owner[r[0]]) for r in runs}) != len(names):
        return None
    placements = []
    for run in runs:
        t = int(owner[run[0]])
        placement = _placement(names[t], tuple(layout[names[t]]["shape"]), positions[run],
                               source[positions[run]] - firsts[t])
        if placement is None:
            return None
        placements.append(placement)
    inputs = _graph_inputs(compiled_graph, placements)
    if inputs is None:
        return None
    graph_inputs = initializers_to_inputs(compiled_graph, [name for name, _ in inputs.values()])
    return CompiledBackbone(graph_inputs, constants, placements, inputs)


def _graph_inputs(graph: bytes, placements: list[Placement]) -> dict[str, tuple[str, tuple[int, ...]]] | None:
    """The optimized graph's initializer holding exactly each placement's elements; None if any is
    missing, shared or not exactly one placement."""
    by_start = {p.start: p for p in placements}
    inputs = {}
    for init in initializers(graph):
        if init.external.get("location") != COMPILED_FILE:
            continue
        offset, length = int(init.external.get("offset", 0)), int(init.external.get("length", -1))
        p = by_start.get(offset // 4)
        if p is None or offset % 4 or length != 4 * p.size or int(np.prod(init.dims, dtype=np.int64)) != p.size:
            continue  # a constant of the optimized graph: stays an initializer
        if p.name in inputs:
            return None
        inputs[p.name] = (init.name, init.dims)
    return inputs if len(inputs) == len(placements) else None

