"""The inference engine: onnxruntime sessions of the backbone graph with injected weights.

Weights go in through `SessionOptions.add_external_initializers_from_files_in_memory`, with the graph
given as bytes. (`add_initializer` is silently wrong at the default optimization level: the NCHWc
layout transformer ignores overridden conv weights. Weights as graph inputs are correct but cost
35-45% latency.) Execution providers are picked from what is installed (TensorRT, CUDA, else CPU).

Two routes: on CPU the graph is compiled once for this device (`sdk.compiled`: onnxruntime's
optimized graph, weights written straight into its layout), which makes a session ~3x cheaper to
create; with other providers, or if compiling fails its self-check, each session is created from the
plain graph at full optimization. `route` says which.
"""

from __future__ import annotations

import queue
from collections.abc import Sequence

import numpy as np
import onnxruntime as ort

from .compiled import COMPILED_FILE, CompiledBackbone, compile_backbone
from .errors import SdkError

PREFERRED_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CoreMLExecutionProvider",
                       "CPUExecutionProvider")


def default_providers() -> list[str]:
    available = set(ort.get_available_providers())
    return [p for p in PREFERRED_PROVIDERS if p in available] or ["CPUExecutionProvider"]


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
        self._compiled_buffers: queue.SimpleQueue[np.ndarray] = queue.SimpleQueue()  # reused: ORT copies

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

    def compile(self, check_weights: np.ndarray, check_views: dict[str, np.ndarray]) -> None:
        """Compile for this device (CPU only; tried once). `check_weights` (our layout; `check_views` names
        its tensors): real weights on which a compiled session must reproduce a standard one."""
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
        expected = self.session(check_weights, check_views).run(None, {"image": x})[0]
        got = self._open_compiled(candidate, check_views).run(None, {"image": x})[0]
        if np.allclose(got, expected, rtol=1e-4, atol=1e-4 * (float(np.abs(expected).max()) + 1)):
            self.compiled = candidate

    def session(self, buffer: np.ndarray, views: dict[str, np.ndarray]) -> ort.InferenceSession:
        """A session for the weights in `buffer` (our layout; `views` names its tensors). The buffer may be
        reused once this returns: onnxruntime copies the weights."""
        compiled = self.compiled
        if compiled is None:
            return self._open(self.graph, self.external_file, buffer, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
        return self._open_compiled(compiled, views)

    def _open_compiled(self, compiled: CompiledBackbone, views: dict[str, np.ndarray]) -> ort.InferenceSession:
        try:
            buffer = self._compiled_buffers.get_nowait()
        except queue.Empty:
            buffer = compiled.new_buffer()
        try:
            compiled.relayout(views, buffer)
            # Optimization off: the compiled graph is onnxruntime's own fully optimized graph.
            return self._open(compiled.graph, COMPILED_FILE, buffer, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
        finally:
            self._compiled_buffers.put(buffer)

    def _open(self, graph: bytes, external_file: str, buffer: np.ndarray, level: ort.GraphOptimizationLevel
              ) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        # No spin-waiting of idle worker threads: they would steal the cores that the next fusion (BLAS)
        # runs on (scripts/bench_runtime.py, full width: personalize 88 ms without, 107 ms with spinning
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
