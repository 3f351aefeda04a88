"""The backbone graph compiled once for this device, so personalizing skips onnxruntime's slow passes.

At full optimization onnxruntime rewrites the backbone for the CPU (NCHWc blocked convolutions) and
reorders every conv weight into the blocked layout when a session is created: ~2/3 of session time.
That work depends on the graph and the CPU, not on the weights, so it is done once: onnxruntime
saves its optimized graph, and two *probe* weight files tell where each of our weights lands in the
optimized graph's weight file (probe A holds each element's index + 1, probe B its negation; an
element equal in both is a constant of the optimized graph, such as alignment padding).

Personalizing then folds batch norm straight into the optimized layout (each weight is addressed
through a strided view of the compiled weight file, so folding and reordering are one pass) and opens
the optimized graph with graph optimization off. `compile_backbone` returns None when anything is
unexpected (a reorder that is not a known blocked transpose, padding, dropped elements), so the caller
keeps the standard route.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

EXACT_FLOAT_INTEGERS = 2 ** 24   # probe indices must be exact in float32
COMPILED_FILE = "compiled.weights"


@dataclass(frozen=True)
class Placement:
    """Where one source tensor goes in the compiled weight file: copied as is, or, with `view` = (split
    shape, axes), as the source reshaped to the split shape and transposed by axes (a blocked NCHWc conv
    weight)."""
    name: str
    shape: tuple[int, ...]
    start: int                          # first element in the compiled file
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
    graph: bytes
    constants: np.ndarray               # the weight file with our weights zeroed (its other bytes: constants)
    placements: list[Placement]

    def new_buffer(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """A compiled weight file (constants filled in) and named views of our tensors in it."""
        buffer = self.constants.copy()
        return buffer, {p.name: p.view_of(buffer) for p in self.placements}


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
    return CompiledBackbone(compiled_graph, constants, placements)

