"""The inference engine: the bases fused into onnxruntime backbone sessions, by one of two routes.

A route (`Route`) makes weight buffers in its layout, fuses and folds a personalization into one
(`sdk.fusion.plan.FusionPlan`, the same kernels on both routes), and opens a network on it.
- `StandardRoute`: each personalized model gets its own session, created from the plain graph at full
  optimization with the folded weights injected through
  `SessionOptions.add_external_initializers_from_files_in_memory`, the graph given as bytes
  (`add_initializer` is silently wrong at the default optimization level: the NCHWc layout transformer
  ignores overridden conv weights).
- `CompiledRoute` (CPU only, see `sdk.engines.compiled`): the graph is optimized once for this device with its
  conv weights turned into graph inputs, and the fusion plan writes into that graph's layout, so every
  model runs the one shared session with its own weights.
`BackboneEngine.route` says which is used; the compiled route is used only if it reproduces the
standard one (`compile`), and why it was declined is logged at debug level (logger `sdk.engines.onnxruntime`).

On both routes the graph ends in the task's classifier rows, fed as inputs (`append_linear_head`),
so one onnxruntime call gives logits. One personalization is:

>>> with engine.weight_buffer() as target:                 # doctest: +SKIP
...     engine.fuse_and_fold(alpha, target)
...     network = engine.open(target, head_weight, head_bias)
>>> logits = network.run(images)                            # doctest: +SKIP
"""

from __future__ import annotations

import logging
import queue
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

import numpy as np
import onnxruntime as ort

from sdk.engines import device_cache, int8_route_cache
from sdk.engines.compiled import COMPILED_FILE, CompiledBackbone, CompileDeclined, compile_backbone
from sdk.engines.int8 import Int8Plan
from sdk.engines.int8_session import FreshInt8Sessions, Int8RouteDeclined, Int8Sessions, optimized_int8_sessions
from sdk.engines.network import FEATURES, HEAD_BIAS, HEAD_WEIGHT, LOGITS, Network, SplitNetwork, head_inputs
from sdk.errors import BundleError, SdkError
from sdk.format.onnx_proto import ProtoError, append_linear_head
from sdk.fusion.bases import CompactBases
from sdk.fusion.folding import BACKBONE_FILE
from sdk.fusion.native import native_kernel
from sdk.fusion.plan import NUMPY, FusionKernel, FusionPlan, Placement, WeightBuffer

log = logging.getLogger(__name__)

PREFERRED_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CoreMLExecutionProvider",
                       "CPUExecutionProvider")


def default_providers() -> list[str]:
    available = set(ort.get_available_providers())
    return [p for p in PREFERRED_PROVIDERS if p in available] or ["CPUExecutionProvider"]


def backbone_session(graph: bytes, external_file: str, weights: np.ndarray, level: ort.GraphOptimizationLevel,
                     providers: Sequence[str], threads: int | None) -> ort.InferenceSession:
    """A session of `graph` whose external-data file `external_file` is `weights` (float32, in memory)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    # No spin-waiting of idle worker threads: they would steal the cores that the next fusion (BLAS)
    # runs on (scripts/bench_runtime.py at 623336c, full width: personalize 88 ms without, 107 ms with spinning
    # backbone sessions, fusion 27 vs 44 ms; inference ratio 1.07 either way).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if threads:
        options.intra_op_num_threads = threads
    raw = weights.view(np.uint8)
    options.add_external_initializers_from_files_in_memory([external_file], [raw], [raw.nbytes])
    try:
        return ort.InferenceSession(graph, options, providers=list(providers))
    except Exception as e:  # onnxruntime raises untyped errors for bad graphs
        raise SdkError(f"backbone graph could not be loaded: {e}") from None


class Route(Protocol):
    """How personalized weights reach a session: a buffer in the route's layout, the fusion into it,
    and a network reading it. `open` sets `target.in_use` when the network keeps reading the buffer."""
    name: str

    def new_buffer(self) -> WeightBuffer: ...

    def fuse_and_fold(self, alpha: np.ndarray, target: WeightBuffer) -> None: ...

    def open(self, target: WeightBuffer, head_weight: np.ndarray, head_bias: np.ndarray) -> Network: ...


class StandardRoute:
    """A session per model from the plain graph, the folded weights injected as its external data file
    (onnxruntime copies them: the buffer is free again once the session exists)."""
    name = "standard"

    def __init__(self, graph: bytes, bases: CompactBases, layout: dict[str, dict], external_size: int,
                 providers: Sequence[str], threads: int | None, kernel: FusionKernel):
        self.graph, self.providers, self.threads = graph, providers, threads
        self.placements = {n: Placement(n, tuple(e["shape"]), e["offset"] // 4) for n, e in layout.items()}
        # One tile per layer: the plain layout is the bundle's own order, so tiles read the mapped bundle.
        self.plan = FusionPlan.build(bases, self.placements, external_size // 4, kernel, tile_floats=None)

    def new_buffer(self) -> WeightBuffer:
        return self.plan.new_buffer(self)

    def fuse_and_fold(self, alpha: np.ndarray, target: WeightBuffer, prepared: object = None) -> None:
        self.plan.fuse_and_fold(alpha, target, prepared)

    def mixed_weights(self) -> set[str]:
        """The folded weights that `fuse_and_fold` writes (the others, shared layers', were written when the
        buffer was made and stay as they are)."""
        return {layer.weight.name for layer in self.plan.layers}

    def quantizing(self, outputs: dict[str, tuple[np.ndarray, np.ndarray]], qmin: int, qmax: int
                   ) -> tuple[object, set[str]] | None:
        """A form of the fusion plan that also writes these int8 weights (`NativeKernel.quantizing`), for
        `fuse_and_fold(..., prepared)`, and the names it writes; None where the kernel cannot."""
        quantizing = getattr(self.plan.kernel, "quantizing", None)
        return quantizing(self.plan, outputs, qmin, qmax) if quantizing is not None else None

    def open(self, target: WeightBuffer, head_weight: np.ndarray, head_bias: np.ndarray) -> Network:
        session = backbone_session(self.graph, BACKBONE_FILE, target.graph_data,
                                   ort.GraphOptimizationLevel.ORT_ENABLE_ALL, self.providers, self.threads)
        return Network(session, head_inputs(head_weight, head_bias))


class CompiledRoute:
    """One shared session of the graph compiled for this CPU; each model feeds its own buffer, which the
    fusion plan fills in the compiled graph's blocked layout (tiles copied from the bases at warm-up)."""
    name = "compiled"

    def __init__(self, compiled: CompiledBackbone, bases: CompactBases, providers: Sequence[str],
                 threads: int | None, kernel: FusionKernel):
        self.compiled = compiled
        self.placements, graph_floats = compiled.device_layout()
        try:
            self.plan = FusionPlan.build(bases, self.placements, graph_floats, kernel)
        except ValueError as e:
            raise CompileDeclined(str(e)) from None
        self.session = backbone_session(compiled.graph, COMPILED_FILE, compiled.constants,
                                        ort.GraphOptimizationLevel.ORT_DISABLE_ALL, providers, threads)

    def new_buffer(self) -> WeightBuffer:
        target = self.plan.new_buffer(self)
        target.feeds = self.compiled.feeds(target.graph_data, self.placements)
        return target

    def fuse_and_fold(self, alpha: np.ndarray, target: WeightBuffer) -> None:
        self.plan.fuse_and_fold(alpha, target)

    def open(self, target: WeightBuffer, head_weight: np.ndarray, head_bias: np.ndarray) -> Network:
        target.in_use = True
        return Network(self.session, {**target.feeds, **head_inputs(head_weight, head_bias)})


class BackboneEngine:
    """The backbone graph, the bases, and the route personalizations take (standard until `compile`)."""

    def __init__(self, graph: bytes, bases: CompactBases, layout: dict[str, dict], external_size: int,
                 input_size: int, providers: Sequence[str] | None = None, threads: int | None = None,
                 device_compile: bool = True, cache_key: str | None = None):
        # The head is in the graph: in numpy it added 27-35 us to a 0.3 ms inference of the 64-px bench
        # model (ad-hoc A/Bs), as numpy right after an onnxruntime call runs cold (its 128x10 matmul: 12 us,
        # 3 us warm).
        self.backbone_graph = graph  # features only, weights in external data (what exports start from)
        try:
            self.graph = append_linear_head(graph, FEATURES, bases.shapes["fc.weight"][1], HEAD_WEIGHT, HEAD_BIAS,
                                            LOGITS)
        except ProtoError as e:
            raise BundleError(f"backbone graph: {e}") from None
        self.bases, self.layout, self.external_size = bases, layout, external_size
        self.input_size = input_size
        self.providers = list(providers) if providers else default_providers()
        self.threads = threads
        self.kernel: FusionKernel = native_kernel() or NUMPY
        self.standard = StandardRoute(self.graph, bases, layout, external_size, self.providers, threads, self.kernel)
        self.current: Route = self.standard
        self.compile_tried = not device_compile  # True: `compile` does nothing, the route stays standard
        self.device_compile = device_compile
        self.int8_sessions: Int8Sessions | None = None   # chosen at the first int8 model (`open_int8`)
        self._int8_route_lock = threading.Lock()
        self.cache_key = cache_key   # the device cache's entry for this bundle (engines.device_cache); None: not used
        # Pooled: taking fresh pages costs as much as the fusion itself. A standard buffer comes back when
        # its session exists (onnxruntime copies the weights), a compiled one when its model is freed.
        self._buffers: queue.SimpleQueue[WeightBuffer] = queue.SimpleQueue()

    @property
    def route(self) -> str:
        return self.current.name

    def plain_weight_file(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """A zeroed weight file in the plain graph's external-data layout, and named float32 views into it
        (what the exporters and the mobile mirror's golden files use)."""
        buffer = np.zeros(self.external_size // 4, np.float32)
        views = {n: Placement(n, tuple(e["shape"]), e["offset"] // 4).view_of(buffer) for n, e in self.layout.items()}
        return buffer, views

    @contextmanager
    def weight_buffer(self) -> Iterator[WeightBuffer]:
        """A weight buffer in the current route's layout, valid inside the `with` or, once `open` gave it
        to a model, for that model's life."""
        route = self.current
        try:
            target = self._buffers.get_nowait()
        except queue.Empty:
            target = route.new_buffer()
        if target.owner is not route:  # pooled before the route changed
            target = route.new_buffer()
        try:
            yield target
        finally:
            if not target.in_use:
                self._buffers.put(target)

    def fuse_and_fold(self, alpha: np.ndarray, target: WeightBuffer) -> None:
        """target <- the weights mixed with alpha [4, Q], batch norm folded into the convs, in the
        target's layout: what `open` runs."""
        target.owner.fuse_and_fold(alpha, target)

    def open(self, target: WeightBuffer, head_weight: np.ndarray, head_bias: np.ndarray) -> Network:
        """A network running the folded weights in `target` and the head rows [K, C], [K]."""
        network = target.owner.open(target, head_weight, head_bias)
        if target.in_use:
            weakref.finalize(network, self._return_buffer, target)
        return network

    def open_int8(self, plan: Int8Plan, graph: bytes, head_weight: np.ndarray, head_bias: np.ndarray
                  ) -> Network | SplitNetwork:
        """A network of an int8 graph that `plan` wrote (`sdk.engines.int8`) with these head rows. Its sessions are
        made on the route chosen at the first int8 model (`sdk.engines.int8_session`): the optimized one, in two
        halves where it can, where it serves this plan (CPU only, not with device_compile=False; why not is
        logged at debug level), else fresh."""
        with self._int8_route_lock:
            if self.int8_sessions is None:
                self.int8_sessions = self._int8_route(plan, graph)
        return self.int8_sessions.network(graph, head_inputs(head_weight, head_bias))

    def _int8_route(self, plan: Int8Plan, graph: bytes) -> Int8Sessions:
        """The optimized route from the device cache, or made and checked (then stored); else fresh."""
        fresh = FreshInt8Sessions(self.providers, self.threads)
        if not self.device_compile:
            return fresh
        key = int8_route_cache.entry_key(self.cache_key) if self.cache_key is not None else None
        if key is not None and self.providers == ["CPUExecutionProvider"]:
            cached = int8_route_cache.load(key, plan, self.threads)
            if cached is not None:
                return cached
        try:
            route = optimized_int8_sessions(plan, graph, self.providers, self.threads)
            if key is not None:
                int8_route_cache.store(key, route, plan)
            return route
        except Int8RouteDeclined as e:
            log.debug("optimized int8 route declined: %s", e)
        except Exception as e:  # onnxruntime raises untyped errors; the fresh route still works
            log.debug("optimized int8 route declined: onnxruntime failed (%s: %s)", type(e).__name__, e)
        return fresh

    def _return_buffer(self, target: WeightBuffer) -> None:
        target.in_use = False
        self._buffers.put(target)

    def use(self, route: Route) -> None:
        """Personalize on `route` from now on (another engine's, `sdk.engines.executorch`); never compile."""
        self.current, self.compile_tried = route, True

    def compile(self, alpha: np.ndarray) -> None:
        """Compile for this device (CPU only; tried once). The compiled route is kept only if a model
        personalized with `alpha` on it reproduces the standard route's; why not is logged (debug)."""
        if self.compile_tried:
            return
        self.compile_tried = True
        if self.providers != ["CPUExecutionProvider"]:
            log.debug("compiled route declined: providers %s (the compiled graph is CPU-specific)", self.providers)
            return
        if self._compiled_from_cache():
            return
        try:
            compiled = compile_backbone(self.graph, BACKBONE_FILE, self.layout, self.external_size)
            route = CompiledRoute(compiled, self.bases, self.providers, self.threads, self.kernel)
        except CompileDeclined as e:
            log.debug("compiled route declined: %s", e)
            return
        except Exception as e:  # onnxruntime raises untyped errors; the standard route still works
            log.debug("compiled route declined: onnxruntime failed (%s: %s)", type(e).__name__, e)
            return
        x = np.random.default_rng(0).standard_normal([2, 3, self.input_size, self.input_size]).astype(np.float32)
        expected, got = (self._network(r, alpha).run(x) for r in (self.standard, route))
        if np.allclose(got, expected, rtol=1e-4, atol=1e-4 * (float(np.abs(expected).max()) + 1)):
            self.current = route
            if self.cache_key is not None:
                device_cache.store(self.cache_key, compiled)
        else:
            log.debug("compiled route declined: its logits differ from the standard route's by up to %.3g",
                      float(np.abs(got - expected).max()))

    def compile_is_cached(self) -> bool:
        """Whether `compile` will find a device cache entry (it is checked when read, and compiled anew if
        damaged)."""
        return self.cache_key is not None and device_cache.has_entry(self.cache_key)

    def _compiled_from_cache(self) -> bool:
        """Take the compiled route from the device cache: an entry is stored only after its route matched
        the standard one, for this bundle, runtime and CPU, and is checked when read (sdk.engines.device_cache)."""
        compiled = device_cache.load(self.cache_key) if self.cache_key is not None else None
        if compiled is None:
            return False
        try:
            self.current = CompiledRoute(compiled, self.bases, self.providers, self.threads, self.kernel)
            return True
        except Exception as e:  # an entry that does not fit this bundle: compile as if there were none
            log.debug("device cache entry not usable (%s: %s): compiling", type(e).__name__, e)
            return False

    def _network(self, route: Route, alpha: np.ndarray) -> Network:
        target = route.new_buffer()
        route.fuse_and_fold(alpha, target)
        return route.open(target, *target.head)
