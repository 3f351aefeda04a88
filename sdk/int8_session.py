"""How an int8 model's onnxruntime session is made (`personalize(..., precision="int8")`): two routes
behind one protocol.

`FreshInt8Sessions` gives each model a session of its QDQ graph (`sdk.int8`), which onnxruntime optimizes
anew every time: it fuses the QDQ pattern into integer kernels (QLinearConv, QLinearAdd, ...), rewrites
them for the CPU (NHWC) and prepacks the int8 weights. Only the last step depends on the model's values.

`OptimizedInt8Sessions` does the first two once per bundle: onnxruntime saves its optimized form of the
plan's graph, and every tensor that holds a model's values (int8 weights, scales, int32 biases, zero
points) becomes external data whose place in that file is the tensor's place in the model's own QDQ
graph bytes (`Int8Plan.places`). A model's session then reads its values straight from its graph, given
to onnxruntime as an in-memory file, and only prepacks: ~28 against ~43 ms a session at full width,
224 px, on this machine (docs/results/int8_runtime.json, `int8_steps_ms.session`, and `session_routes`).

`optimized_int8_sessions` builds it and declines (`Int8RouteDeclined`, the reason in the message; the
runtime logs it at debug level and keeps the fresh route) when anything is unexpected: onnxruntime made
a tensor of its own, changed one of ours, or optimized a graph of other values into another structure;
or the optimized route's logits are not the fresh route's, bit for bit, on the first model.

>>> sessions = FreshInt8Sessions(["CPUExecutionProvider"], threads=2)   # doctest: +SKIP
>>> session = sessions.open(model.int8_graph)                          # doctest: +SKIP
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import onnxruntime as ort

from .errors import SdkError
from .int8 import Int8Plan
from .onnx_proto import GRAPH_NODE, MODEL_GRAPH, _fields, _only, initializers, initializers_to_external

GRAPH_FILE = "int8.graph"   # the in-memory file name the optimized graph's external data points into
# Constant sharing merges initializers that hold equal values (two zero points that are both 0 in one
# model): the optimized graph's tensors would then depend on the values it was made from.
VALUE_DEPENDENT_OPTIMIZERS = ["ConstantSharing"]


class Int8RouteDeclined(Exception):
    """The optimized route cannot serve this plan's graphs (the reason is the message)."""


class Int8Sessions(Protocol):
    name: str

    def open(self, graph: bytes) -> ort.InferenceSession:
        """A session of this int8 graph (a graph `Int8Plan.quantize` wrote), ready to run."""
        ...


def _options(level: ort.GraphOptimizationLevel, threads: int | None) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")   # as sdk.engine's sessions
    options.log_severity_level = 3   # saving an optimized graph warns that it is CPU specific: it is meant to be
    if threads:
        options.intra_op_num_threads = threads
    return options


def _session(graph: bytes, options: ort.SessionOptions, providers: Sequence[str], **kwargs) -> ort.InferenceSession:
    try:
        return ort.InferenceSession(graph, options, providers=list(providers), **kwargs)
    except Exception as e:  # onnxruntime raises untyped errors for bad graphs
        raise SdkError(f"the int8 graph could not be loaded: {e}") from None


class FreshInt8Sessions:
    """A session of each model's QDQ graph, fully optimized by onnxruntime each time."""

    name = "fresh"

    def __init__(self, providers: Sequence[str], threads: int | None):
        self.providers, self.threads = list(providers), threads

    def open(self, graph: bytes) -> ort.InferenceSession:
        return _session(graph, _options(ort.GraphOptimizationLevel.ORT_ENABLE_ALL, self.threads), self.providers)


class OptimizedInt8Sessions:
    """onnxruntime's optimized form of the plan's graph, made once; each model's session reads the model's
    values from its own graph bytes (`optimized_int8_sessions` builds and checks it)."""

    name = "optimized once"

    def __init__(self, optimized: bytes, threads: int | None):
        self.optimized, self.threads = optimized, threads

    def open(self, graph: bytes) -> ort.InferenceSession:
        options = _options(ort.GraphOptimizationLevel.ORT_DISABLE_ALL, self.threads)
        data = np.frombuffer(graph, np.uint8)
        options.add_external_initializers_from_files_in_memory([GRAPH_FILE], [data], [data.nbytes])
        session = _session(self.optimized, options, ["CPUExecutionProvider"])
        # onnxruntime copied the standard route's in-memory weights (sdk.engine); should it read these in
        # place instead, they live as long as the session does.
        session.graph_bytes = graph
        return session


def _optimize(graph: bytes, threads: int | None) -> bytes:
    """onnxruntime's fully optimized form of a self-contained graph (for this CPU), as a model."""
    with tempfile.TemporaryDirectory() as tmp:
        options = _options(ort.GraphOptimizationLevel.ORT_ENABLE_ALL, threads)
        options.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        _session(graph, options, ["CPUExecutionProvider"], disabled_optimizers=VALUE_DEPENDENT_OPTIMIZERS)
        return (Path(tmp) / "optimized.onnx").read_bytes()


def _nodes(model: bytes) -> list[bytes]:
    return [raw for field, _, raw in _fields(_only(model, MODEL_GRAPH)) if field == GRAPH_NODE]


def optimized_int8_sessions(plan: Int8Plan, graph: bytes, providers: Sequence[str], threads: int | None
                            ) -> OptimizedInt8Sessions:
    """The optimized route for the graphs `plan` writes, checked on `graph` (the first model's) against a
    fresh session. Int8RouteDeclined if it cannot serve them (the reason is the message)."""
    if list(providers) != ["CPUExecutionProvider"]:
        raise Int8RouteDeclined(f"providers {list(providers)} (the optimized graph is CPU-specific)")
    optimized, of_probe = _optimize(graph, threads), _optimize(plan.probe(), threads)
    if _nodes(optimized) != _nodes(of_probe):
        raise Int8RouteDeclined("onnxruntime optimizes graphs of other values into another structure")
    places = plan.places()
    ours = {t.name: t for t in initializers(graph)}
    for tensor in initializers(optimized):
        if tensor.name not in ours:
            raise Int8RouteDeclined(f"onnxruntime made a tensor of its own: {tensor.name!r}")
        if tensor.name not in places and tensor.raw != ours[tensor.name].raw:
            raise Int8RouteDeclined(f"onnxruntime changed the constant {tensor.name!r}")
    route = OptimizedInt8Sessions(initializers_to_external(optimized, places, GRAPH_FILE), threads)
    fresh = FreshInt8Sessions(providers, threads).open(graph)
    feeds = {i.name: np.random.default_rng(0).standard_normal([1 if d is None or isinstance(d, str) else d
                                                                for d in i.shape]).astype(np.float32)
             for i in fresh.get_inputs()}
    expected, got = fresh.run(None, feeds)[0], route.open(graph).run(None, feeds)[0]
    if not np.array_equal(expected, got):
        raise Int8RouteDeclined(f"its logits differ from a fresh session's by up to {np.abs(got - expected).max():.3g}")
    return route
