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
time). And the bases are reordered once into that layout (`DeviceBases`): one GEMV per block writes
the fused conv weights where the session reads them, and folding batch norm is a per-channel scale in
place. `compile_backbone` returns None when anything is unexpected (a reorder that is not a known
blocked transpose, padding, dropped elements, weights shared between tensors), so the caller keeps
the standard route.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnxruntime as ort

from .fusion import WeightBuffer
from .onnx_proto import initializers, initializers_to_inputs

EXACT_FLOAT_INTEGERS = 2 ** 24   # probe indices must be exact in float32
COMPILED_FILE = "compiled.weights"
# Inputs start on 64-byte boundaries: MLAS convolutions ran 17% slower on weights that did not
# (full-width ResNet-18 at 224 px: 20.1 vs 17.1 ms per image, measured with the inputs unaligned).
ALIGN_FLOATS = 16


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


@dataclass
class DeviceBases:
    """The bases reordered once for the compiled graph. Block b's row in a device buffer holds the block's
    parameters with every conv weight in its blocked layout at a 64-byte aligned start (as the session
    reads it) and batch norm and classifier as they are; the folded conv biases follow the rows. So one
    GEMV per block (`blocks[b]`, [Q, row length]) fuses straight into the session's layout.

    A full copy of the bases in memory (468 MB for a full-width ResNet-18 with Q=10), instead of
    reading the memory-mapped bundle: that is the price of skipping a fold-and-reorder pass (~19 ms)."""
    blocks: list[np.ndarray]
    rows: list[int]                     # start of each block's row in a device buffer
    size: int                           # floats in a device buffer
    placements: dict[str, Placement]    # folded weights: start in a device buffer
    params: dict[str, tuple[int, tuple[int, ...]]]   # other fused parameters: (start, shape)
    inputs: dict[str, tuple[str, tuple[int, ...]]]

    def new_buffer(self) -> WeightBuffer:
        data = aligned_zeros(self.size)
        rows = [data[start:start + block.shape[1]] for start, block in zip(self.rows, self.blocks, strict=True)]
        folded = {name: p.view_of(data) for name, p in self.placements.items()}
        params = {name: data[s:s + int(np.prod(shape, dtype=np.int64))].reshape(shape)
                  for name, (s, shape) in self.params.items()}
        params.update({name: view for name, view in folded.items() if name.endswith(".weight")})
        feeds = {graph_name: data[self.placements[name].start:self.placements[name].start
                                  + self.placements[name].size].reshape(shape)
                 for name, (graph_name, shape) in self.inputs.items()}
        return WeightBuffer(rows, params, folded, data, feeds, self)


def reorder_bases(compiled: CompiledBackbone, bases: list[np.ndarray], block_layout: list[list[str]],
                  shapes: dict[str, tuple[int, ...]]) -> DeviceBases:
    """`bases[b]` ([Q, P_b], names in `block_layout[b]` order) reordered into device rows."""
    folded = {p.name: p for p in compiled.placements}
    placements, params, rows, moves, cursor = {}, {}, [], [], 0
    for names in block_layout:
        cursor = _aligned(cursor)
        rows.append(cursor)
        block_moves, source = [], 0
        for name in names:
            size = int(np.prod(shapes[name], dtype=np.int64))
            if name in folded:  # a conv weight: where the session reads it
                cursor = _aligned(cursor)
                placements[name] = replace(folded[name], start=cursor)
            else:
                params[name] = (cursor, tuple(shapes[name]))
            block_moves.append((name, source, size, cursor))
            source, cursor = source + size, cursor + size
        moves.append((block_moves, cursor))
    for name, p in folded.items():
        if name not in placements:  # conv biases: made by folding, not fused
            cursor = _aligned(cursor)
            placements[name] = replace(p, start=cursor)
            cursor += p.size
    blocks = []
    for base, start, (block_moves, end) in zip(bases, rows, moves, strict=True):
        block = np.zeros((base.shape[0], end - start), np.float32)
        for name, source, size, dest in block_moves:
            for q in range(base.shape[0]):
                if name in placements:
                    view = replace(placements[name], start=dest - start).view_of(block[q])
                    view[...] = base[q, source:source + size].reshape(view.shape)
                else:
                    block[q, dest - start:dest - start + size] = base[q, source:source + size]
        blocks.append(block)
    return DeviceBases(blocks, rows, _aligned(cursor), placements, params, compiled.inputs)


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

