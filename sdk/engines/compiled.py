"""The backbone graph compiled once for this device, so personalizing creates no session at all.

At full optimization onnxruntime rewrites the backbone for the CPU (NCHWc blocked convolutions) and
reorders every conv weight into the blocked layout when a session is created: ~2/3 of session time.
That work depends on the graph and the CPU, not on the weights, so it is done once: onnxruntime
saves its optimized graph, and two *probe* weight files tell where each of our weights lands in the
optimized graph's weight file (probe A holds each element's index + 1, probe B its negation; an
element equal in both is a constant of the optimized graph, such as alignment padding).

The optimized graph's copies of our weights then become graph inputs (`sdk.format.onnx_proto`), so one
session serves every personalized model, each feeding its own weights, already in the blocked layout
(unlike inputs of the plain graph, which cost 35-45% latency because nothing reorders them ahead of
time). The fusion plan (`sdk.fusion.plan`) then writes every fused, folded weight where the session reads
it (`device_layout`). `compile_backbone` raises `CompileDeclined`, saying why, when anything is
unexpected (a reorder that is not a known blocked transpose, padding, dropped elements, weights shared
between tensors), so the caller keeps the standard route.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnxruntime as ort

from sdk.format.onnx_proto import initializers, initializers_to_inputs
from sdk.fusion.plan import Placement, aligned, blocked_views

EXACT_FLOAT_INTEGERS = 2 ** 24   # probe indices must be exact in float32
COMPILED_FILE = "compiled.weights"


class CompileDeclined(Exception):
    """The backbone's optimized form is not one the compiled route can feed (the reason is the message)."""


@dataclass
class CompiledBackbone:
    graph: bytes                        # onnxruntime's optimized graph, our folded weights as graph inputs
    constants: np.ndarray               # its weight file, for the initializers that stay (ours zeroed)
    placements: list[Placement]         # each folded weight in the optimized weight file (from the probes)
    inputs: dict[str, tuple[str, tuple[int, ...]]]   # folded weight -> (graph input, its shape)

    def device_layout(self) -> tuple[dict[str, Placement], int]:
        """Where each folded weight goes in a weight buffer for this graph (each input 64-byte aligned, in
        its blocked layout), and the floats they span."""
        placements, cursor = {}, 0
        for p in self.placements:
            placements[p.name] = replace(p, start=aligned(cursor))
            cursor = placements[p.name].start + p.size
        return placements, aligned(cursor)

    def feeds(self, graph_data: np.ndarray, placements: dict[str, Placement]) -> dict[str, np.ndarray]:
        """Graph input -> its array in a buffer laid out by `device_layout`."""
        return {graph_name: graph_data[placements[name].start:placements[name].start + placements[name].size]
                .reshape(shape) for name, (graph_name, shape) in self.inputs.items()}


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


def _placement(name: str, shape: tuple[int, ...], positions: np.ndarray, sources: np.ndarray) -> Placement | None:
    """How a tensor's elements (at consecutive `positions`, holding its elements `sources`) are laid out;
    None if not as they are or as a blocked transpose."""
    size = int(np.prod(shape, dtype=np.int64))
    if len(positions) != size:
        return None  # padded or partly dropped
    start = int(positions[0])
    if np.array_equal(sources, np.arange(size)):
        return Placement(name, shape, start)
    for split, axes in blocked_views(shape):
        if np.array_equal(np.arange(size).reshape(split).transpose(axes).reshape(-1), sources):
            return Placement(name, shape, start, view=(split, axes))
    return None


def compile_backbone(graph: bytes, external_file: str, layout: dict[str, dict], external_size: int
                     ) -> CompiledBackbone:
    """Compile the backbone for this CPU. CompileDeclined if its optimized form is not our weights, each
    as is or as a blocked transpose. (The engine also checks a compiled session against a standard one
    before using it.)"""
    count = external_size // 4
    if count >= EXACT_FLOAT_INTEGERS:
        raise CompileDeclined(f"{count} weights: probe indices would not be exact in float32")
    probe = np.arange(1, count + 1, dtype=np.float32)
    compiled_graph, a = _optimize(graph, external_file, probe)
    _, b = _optimize(graph, external_file, -probe)
    if len(a) != len(b):
        raise CompileDeclined("the optimized weight file's size depends on the weights")
    from_weights = a != b
    if not np.array_equal(a[from_weights], -b[from_weights]):
        raise CompileDeclined("the optimized graph computes on the weights (not a pure reorder)")
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
        raise CompileDeclined(f"{len(runs)} runs of weights in the optimized file for {len(names)} tensors")
    placements = []
    for run in runs:
        t = int(owner[run[0]])
        placement = _placement(names[t], tuple(layout[names[t]]["shape"]), positions[run],
                               source[positions[run]] - firsts[t])
        if placement is None:
            raise CompileDeclined(f"{names[t]}: reordered in a way that is not a known blocked transpose")
        placements.append(placement)
    inputs = _graph_inputs(compiled_graph, placements)
    if inputs is None:
        raise CompileDeclined("a folded weight is not exactly one initializer of the optimized graph")
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

