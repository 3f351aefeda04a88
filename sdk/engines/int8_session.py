"""How an int8 model's onnxruntime sessions are made (`personalize(..., precision="int8")`): three routes
behind one protocol (`Int8Sessions.network`).

`FreshInt8Sessions` gives each model a session of its QDQ graph (`sdk.engines.int8`), which onnxruntime optimizes
anew every time: it fuses the QDQ pattern into integer kernels (QLinearConv, QLinearAdd, ...), rewrites
them for the CPU (NHWC) and prepacks the int8 weights. Only the last step depends on the model's values.

`OptimizedInt8Sessions` does the first two once per bundle: onnxruntime saves its optimized form of the
plan's graph, and every tensor that holds a model's values (int8 weights, scales, int32 biases, zero
points) becomes external data whose place in that file is the tensor's place in the model's own QDQ
graph bytes (`Int8Plan.places`). A model's session then reads its values straight from its graph, given
to onnxruntime as an in-memory file, and only prepacks.

`SplitInt8Sessions` is that route with the optimized graph cut in two (`choose_cut`, `split_graph`): the
prepacking runs on one thread per session, so a model's two half-sessions, made at once on two threads,
take about half as long as one whole session; the network runs them in turn (`sdk.engines.network.SplitNetwork`).
It serves full-width graphs (MIN_SPLIT_BYTES) where the process may run on two cores or more
(`splits`: its CPU affinity), unless `threads=1`. What each
route costs: docs/results/int8_runtime.json, `full_width.*.session_routes`.

`optimized_int8_sessions` builds the optimized routes and declines (`Int8RouteDeclined`, the reason in the
message; the runtime logs it at debug level and keeps the fresh route) when anything is unexpected:
onnxruntime made a tensor of its own, changed one of ours, or optimized a graph of other values into
another structure; or the optimized route's logits are not the fresh route's, bit for bit, on the first
model. The halves are checked the same way (if they differ, the whole optimized graph serves).

>>> sessions = FreshInt8Sessions(["CPUExecutionProvider"], threads=2)   # doctest: +SKIP
>>> network = sessions.network(model.int8_graph, head_inputs(model.head_weight, model.head_bias))  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import numpy as np
import onnxruntime as ort

from sdk.engines.int8 import Int8Plan
from sdk.engines.network import HEAD_BIAS, HEAD_WEIGHT, IMAGE, Network, SplitNetwork
from sdk.errors import SdkError
from sdk.format.onnx_proto import (
    GRAPH_NODE,
    MODEL_GRAPH,
    NODE_OP_TYPE,
    ProtoError,
    _fields,
    _only,
    crossing,
    initializers,
    initializers_to_external,
    node_edges,
    parse_fields,
    split_graph,
    text,
)

log = logging.getLogger(__name__)

GRAPH_FILE = "int8.graph"   # the in-memory file name the optimized graph's external data points into
# Constant sharing merges initializers that hold equal values (two zero points that are both 0 in one
# model): the optimized graph's tensors would then depend on the values it was made from.
VALUE_DEPENDENT_OPTIMIZERS = ["ConstantSharing"]
UINT8 = 2   # TensorProto.UINT8: every activation between the integer kernels
UINT8_MAKERS = {"QLinearConv", "QLinearAdd", "NhwcMaxPool", "QLinearGlobalAveragePool"}
# What making a session costs for one more node that reads weights, in bytes of weights prepacked: fitted to
# ad-hoc timings of a full-width graph's halves at every cut (224 px, AMD EPYC Zen 4, onnxruntime 1.31):
# ~0.12 ms a node and ~0.77 ms a MB. The stem and layer1-3's many small convs cost more than their bytes.
NODE_COST_BYTES = 160_000
# A graph of fewer weight bytes is not cut: the second session costs each inference ~0.04 ms (ad hoc, batch 1,
# medians of 200 alternated: +16% at the bench size, 0.7 MB, 64 px; +4% full width at 64 px, +2% at 224),
# more than the ~0.3 ms a small graph's halves save once.
MIN_SPLIT_BYTES = 4 << 20


class Int8RouteDeclined(Exception):
    """The optimized route cannot serve this plan's graphs (the reason is the message)."""


class Int8Sessions(Protocol):
    name: str

    def network(self, graph: bytes, heads: dict[str, np.ndarray]) -> Network | SplitNetwork:
        """The network of this int8 graph (a graph `Int8Plan.quantize` wrote) fed these head rows, ready to run."""
        ...


def _options(level: ort.GraphOptimizationLevel, threads: int | None) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")   # as sdk.engines.onnxruntime's sessions
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

    def network(self, graph: bytes, heads: dict[str, np.ndarray]) -> Network:
        return Network(self.open(graph), heads)


class OptimizedInt8Sessions:
    """onnxruntime's optimized form of the plan's graph, made once; each model's session reads the model's
    values from its own graph bytes (`optimized_int8_sessions` builds and checks it)."""

    name = "optimized once"
    cut: int | None = None   # not cut in two (SplitInt8Sessions: the node its second half starts at)

    def __init__(self, optimized: bytes, threads: int | None):
        self.optimized, self.threads = optimized, threads

    def open(self, graph: bytes) -> ort.InferenceSession:
        options = _options(ort.GraphOptimizationLevel.ORT_DISABLE_ALL, self.threads)
        data = np.frombuffer(graph, np.uint8)
        options.add_external_initializers_from_files_in_memory([GRAPH_FILE], [data], [data.nbytes])
        session = _session(self.optimized, options, ["CPUExecutionProvider"])
        # onnxruntime copied the standard route's in-memory weights (sdk.engines.onnxruntime); should it read these in
        # place instead, they live as long as the session does.
        session.graph_bytes = graph
        return session

    def network(self, graph: bytes, heads: dict[str, np.ndarray]) -> Network:
        return Network(self.open(graph), heads)


class SplitInt8Sessions:
    """The optimized route with its graph cut in two (`split_graph`, where `choose_cut` says): a model's two
    sessions are made at once, the second on a worker thread, so that onnxruntime prepacks the two halves'
    weights on two cores."""

    name = "optimized once, in two halves"

    def __init__(self, optimized: bytes, cut: int, threads: int | None):
        first, second, self.crossing = split_graph(optimized, cut, UINT8)
        self.optimized, self.cut = optimized, cut   # the whole optimized graph, and where it is cut
        self.halves = (OptimizedInt8Sessions(first, threads), OptimizedInt8Sessions(second, threads))
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="taper-int8-session")

    def network(self, graph: bytes, heads: dict[str, np.ndarray]) -> SplitNetwork:
        second = self._worker.submit(self.halves[1].open, graph)
        first = self.halves[0].open(graph)   # the worker's error, if any, is raised by result()
        return SplitNetwork(first, self.crossing, Network(second.result(), heads))


def splits(threads: int | None) -> bool:
    """Whether a model's two half-sessions can be made at once: `threads` is not 1 and this process may run
    on two cores or more (its CPU affinity where the platform says it, else the CPU count)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return threads != 1 and cores >= 2


def choose_cut(optimized: bytes) -> int | None:
    """Where to cut an optimized int8 graph so that its two halves' sessions take about as long to make,
    or None where no cut would serve or the graph is small (MIN_SPLIT_BYTES): the node index that minimizes
    the larger half's cost (the bytes of the initializers its nodes read, plus NODE_COST_BYTES a node that
    reads any), among the cuts crossed only by tensors of QLinear and NHWC max-pool nodes (uint8 in the
    graphs `Int8Plan` writes)."""
    sizes = {t.name: int(t.external.get("length", 0)) if t.external else len(t.raw) for t in initializers(optimized)}
    if sum(sizes.values()) < MIN_SPLIT_BYTES:
        return None
    nodes = [(text(_only(node, NODE_OP_TYPE)), *node_edges(node))
             for field, node in parse_fields(_only(optimized, MODEL_GRAPH)) if field == GRAPH_NODE]
    costs = []
    for _, inputs, _ in nodes:
        weights = [sizes[name] for name in inputs if name in sizes]
        costs.append(sum(weights) + (NODE_COST_BYTES if weights else 0))
    maker = {name: op for op, _, outputs in nodes for name in outputs}
    best, best_cost = None, sum(costs)
    edges = [(inputs, outputs) for _, inputs, outputs in nodes]
    for cut in range(1, len(nodes)):
        names = crossing(edges, cut)
        if names and all(maker[name] in UINT8_MAKERS for name in names):
            cost = max(sum(costs[:cut]), sum(costs[cut:]))
            if cost < best_cost:
                best, best_cost = cut, cost
    return best


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
                            ) -> OptimizedInt8Sessions | SplitInt8Sessions:
    """The optimized route for the graphs `plan` writes, checked on `graph` (the first model's) against a
    fresh session: in two halves (`SplitInt8Sessions`) where the CPU has two cores for them, `threads` is
    not 1 and a cut serves, else whole. Int8RouteDeclined if it cannot serve them (the reason is the
    message)."""
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
    external = initializers_to_external(optimized, places, GRAPH_FILE)
    route = OptimizedInt8Sessions(external, threads)
    fresh = FreshInt8Sessions(providers, threads).open(graph)
    feeds = {i.name: np.random.default_rng(0).standard_normal([1 if d is None or isinstance(d, str) else d
                                                                for d in i.shape]).astype(np.float32)
             for i in fresh.get_inputs()}
    expected = fresh.run(None, feeds)[0]
    heads = {name: feeds[name] for name in (HEAD_WEIGHT, HEAD_BIAS)}

    def differs(candidate: OptimizedInt8Sessions | SplitInt8Sessions) -> float:
        got = candidate.network(graph, heads).run(feeds[IMAGE])
        return 0.0 if np.array_equal(expected, got) else float(np.abs(got - expected).max())

    difference = differs(route)
    if difference:
        raise Int8RouteDeclined(f"its logits differ from a fresh session's by up to {difference:.3g}")
    cut = choose_cut(external) if splits(threads) else None
    if cut is not None:
        try:
            halves = SplitInt8Sessions(external, cut, threads)
            difference = differs(halves)
        except (ProtoError, SdkError) as e:
            log.debug("int8 graph not cut in two: %s", e)
        else:
            if not difference:
                return halves
            log.debug("int8 graph not cut in two: its logits differ by up to %.3g", difference)
    return route
