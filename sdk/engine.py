"""The inference engine: onnxruntime sessions of the backbone graph with injected weights.

Weights go in through `SessionOptions.add_external_initializers_from_files_in_memory`, with the graph
given as bytes. (`add_initializer` is silently wrong at the default optimization level: the NCHWc
layout transformer ignores overridden conv weights. Weights as graph inputs are correct but cost
35-45% latency.) Execution providers are picked from what is installed (TensorRT, CUDA, else CPU).

Two routes: on CPU the graph is compiled once for this device (`sdk.compiled`: onnxruntime's
optimized graph, batch norm folded straight into its weight layout), which makes a session ~3x
cheaper to create; with other providers, or if compiling fails its self-check, each session is
created from the plain graph at full optimization. `route` says which. Either way:

>>> with engine.weight_buffer() as target:                 # doctest: +SKIP
...     fold_batch_norm(fused_weights, target.views)
...     session = engine.open(target)
"""

from __future__ import annotations

import queue
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import onnxruntime as ort

from .compiled import COMPILED_FILE, CompiledBackbone, compile_backbone
from .errors import SdkError
from .folding import fold_batch_norm

PREFERRED_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CoreMLExecutionProvider",
                       "CPUExecutionProvider")


def default_providers() -> list[str]:
    available = set(ort.get_available_providers())
    return [p for p in PREFERRED_PROVIDERS if p in available] or ["CPUExecutionProvider"]


@dataclass
class WeightBuffer:
    """The backbone's weight file in one route's layout, and named views of the folded weights in it."""
    data: np.ndarray
    views: dict[str, np.ndarray]
    compiled: CompiledBackbone | None     # None: the plain graph's layout


class BackboneEngine:
    def __init__(self, graph: bytes, external_file: str, external_size: int, layout: dict[str, dict],
                 input_size: int, providers: Sequence[str] | None = None, threads: int | None = None,
                 device_compile: bool = True):
        self.graph, self.external_file, self.external_size = graph, external_file, external_size
        self.input_size = input_size
        self.layout = layout
        self.providers = list(providers) if providers else default_providers()
        self.threads = threads
        self.compiled: CompiledBackbone | None = None
        self.compile_tried = not device_compile  # False: `compile` does nothing, the route stays standard
        self._buffers: queue.SimpleQueue[WeightBuffer] = queue.SimpleQueue()  # reused: onnxruntime copies

    def new_buffer(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """A zeroed weight buffer in the graph's external-data layout, and named float32 views into it."""
        buffer = np.zeros(self.external_size // 4, np.float32)
        views = {}
        for name, entry in self.layout.items():
            start, size = entry["offset"] // 4, int(np.prod(entry["shape"], dtype=np.int64))
            views[name] = buffer[start:start + size].reshape(entry["shape"])
        return buffer, views

    @property
    def route(self) -> str:
        return "compiled" if self.compiled is not None else "standard"

    @contextmanager
    def weight_buffer(self) -> Iterator[WeightBuffer]:
        """A weight buffer in the current route's layout, to fold weights into and `open`. Pooled (taking
        fresh pages costs as much as the fusion itself): valid inside the `with` only, which is enough
        because onnxruntime copies the weights when a session is created."""
        compiled = self.compiled
        try:
            target = self._buffers.get_nowait()
        except queue.Empty:
            target = self._new_weight_buffer(compiled)
        if target.compiled is not compiled:  # pooled before the route changed
            target = self._new_weight_buffer(compiled)
        try:
            yield target
        finally:
            self._buffers.put(target)

    def open(self, target: WeightBuffer) -> ort.InferenceSession:
        """A session for the weights in `target`."""
        if target.compiled is None:
            return self._open(self.graph, self.external_file, target.data, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
        # Optimization off: the compiled graph is onnxruntime's own fully optimized graph.
        return self._open(target.compiled.graph, COMPILED_FILE, target.data, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)

    def compile(self, weights: Mapping[str, np.ndarray]) -> None:
        """Compile for this device (CPU only; tried once). `weights`: real fused weights (unfolded, named)
        on which a compiled session must reproduce a standard one, else the route stays standard."""
        if self.compile_tried:
            return
        self.compile_tried = True
        if self.providers != ["CPUExecutionProvider"]:  # the compiled graph is CPU-specific (NCHWc)
            return
        try:
            candidate = compile_backbone(self.graph, self.external_file, self.layout, self.external_size)
        except Exception:  # onnxruntime raises untyped errors; the standard route still works
            return
        if candidate is None:
            return
        x = np.random.default_rng(0).standard_normal([2, 3, self.input_size, self.input_size]).astype(np.float32)
        expected, got = (self._folded_session(c, weights).run(None, {"image": x})[0] for c in (None, candidate))
        if np.allclose(got, expected, rtol=1e-4, atol=1e-4 * (float(np.abs(expected).max()) + 1)):
            self.compiled = candidate

    def _folded_session(self, compiled: CompiledBackbone | None, weights: Mapping[str, np.ndarray]
                        ) -> ort.InferenceSession:
        target = self._new_weight_buffer(compiled)
        fold_batch_norm(weights, target.views)
        return self.open(target)

    def _new_weight_buffer(self, compiled: CompiledBackbone | None) -> WeightBuffer:
        data, views = self.new_buffer() if compiled is None else compiled.new_buffer()
        return WeightBuffer(data, views, compiled)

    def _open(self, graph: bytes, external_file: str, buffer: np.ndarray, level: ort.GraphOptimizationLevel
              ) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        # No spin-waiting of idle worker threads: they would steal the cores that the next fusion (BLAS)
        # runs on (scripts/bench_runtime.py at 623336c, full width: personalize 88 ms without, 107 ms with spinning
        # backbone sessions, fusion 27 vs 44 ms; inference ratio 1.07 either way).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if self.threads:
            options.intra_op_num_threads = self.threads
        raw = buffer.view(np.uint8)
        options.add_external_initializers_from_files_in_memory([external_file], [raw], [raw.nbytes])
        try:
            return ort.InferenceSession(graph, options, providers=self.providers)
        except Exception as e:  # onnxruntime raises untyped errors for bad graphs
            raise SdkError(f"backbone graph could not be loaded: {e}") from None
