"""The inference engine: the bases fused into onnxruntime backbone sessions.

Two routes. Standard: each personalized model gets its own session, created from the plain graph at
full optimization with the folded weights injected through
`SessionOptions.add_external_initializers_from_files_in_memory`, the graph given as bytes
(`add_initializer` is silently wrong at the default optimization level: the NCHWc layout
transformer ignores overridden conv weights). Compiled (CPU only, see `sdk.compiled`): the graph is
optimized once for this device with its conv weights turned into graph inputs, and the bases are
reordered into that graph's layout, so personalizing is a GEMV per tile of weights, each folded while
in cache, and every model runs the one shared session with its own weights. `route` says which is
used; the compiled route is used only if it reproduces the standard one (`compile`).

On both routes the graph ends in the task's classifier rows, fed as inputs (`append_linear_head`),
so one onnxruntime call gives logits. One personalization is:

>>> with engine.weight_buffer() as target:                 # doctest: +SKIP
...     engine.fuse_and_fold(alpha, target)
...     network = engine.open(target, head_weight, head_bias)
>>> logits = network.run(images)                            # doctest: +SKIP
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import onnxruntime as ort

from .compiled import COMPILED_FILE, DeviceBases, compile_backbone, reorder_bases
from .errors import BundleError, SdkError
from .folding import fold_batch_norm
from .fusion import WeightBuffer, fuse_blocks, unflatten
from .onnx_proto import ProtoError, append_linear_head

FEATURES, LOGITS, HEAD_WEIGHT, HEAD_BIAS = "features", "logits", "head_weight", "head_bias"
PREFERRED_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CoreMLExecutionProvider",
                       "CPUExecutionProvider")


def default_providers() -> list[str]:
    available = set(ort.get_available_providers())
    return [p for p in PREFERRED_PROVIDERS if p in available] or ["CPUExecutionProvider"]


def _head_inputs(weight: np.ndarray, bias: np.ndarray) -> dict[str, np.ndarray]:
    """The classifier rows as the graph inputs `append_linear_head` declared (bound as is: contiguous)."""
    return {HEAD_WEIGHT: np.ascontiguousarray(weight, np.float32), HEAD_BIAS: np.ascontiguousarray(bias, np.float32)}


@dataclass
class Network:
    """A personalized network: a backbone session with its task head, and the inputs it is fed besides
    the image (the head rows; on the compiled route also the folded weights)."""
    session: ort.InferenceSession
    weights: dict[str, np.ndarray]
    _per_thread: threading.local = field(default_factory=threading.local, repr=False)

    def run(self, images: np.ndarray) -> np.ndarray:
        """[N, K] logits of normalized [N, 3, H, W] float32 images."""
        images = np.ascontiguousarray(images, np.float32)
        # The weights are bound once per thread (passing 40 arrays with every run cost 0.08 ms, 20% of an
        # inference of the 64-px bench model; an IOBinding must not be shared between threads), and so is
        # an output array per batch size, which onnxruntime writes into instead of allocating its own
        # (64-px bench model: 0.317 vs 0.355 ms per image, ad-hoc A/B).
        state = self._per_thread
        if getattr(state, "binding", None) is None:
            state.binding, state.out = self.session.io_binding(), None
            for name, array in self.weights.items():
                state.binding.bind_cpu_input(name, array)
        if state.out is None or len(state.out) != len(images):
            state.out = np.empty((len(images), len(self.weights[HEAD_BIAS])), np.float32)
            state.binding.bind_output(LOGITS, "cpu", 0, np.float32, list(state.out.shape), state.out.ctypes.data)
        state.binding.bind_cpu_input("image", images)
        self.session.run_with_iobinding(state.binding)
        return state.out.copy()  # the next run overwrites state.out


class BackboneEngine:
    def __init__(self, graph: bytes, external_file: str, external_size: int, layout: dict[str, dict],
                 bases: list[np.ndarray], block_layout: list[list[str]], shapes: dict[str, tuple[int, ...]],
                 input_size: int, providers: Sequence[str] | None = None, threads: int | None = None,
                 device_compile: bool = True):
        # The head is in the graph: in numpy it added 27-35 us to a 0.3 ms inference of the 64-px bench
        # model (ad-hoc A/Bs), as numpy right after an onnxruntime call runs cold (its 128x10 matmul: 12 us,
        # 3 us warm).
        try:
            self.graph = append_linear_head(graph, FEATURES, shapes["fc.weight"][1], HEAD_WEIGHT, HEAD_BIAS, LOGITS)
        except ProtoError as e:
            raise BundleError(f"backbone graph: {e}") from None
        self.external_file, self.external_size = external_file, external_size
        self.layout = layout                  # folded weights in the plain graph's external-data file
        self.bases, self.block_layout, self.shapes = bases, block_layout, shapes
        self.input_size = input_size
        self.providers = list(providers) if providers else default_providers()
        self.threads = threads
        self.device: DeviceBases | None = None
        self.shared_session: ort.InferenceSession | None = None
        self.compile_tried = not device_compile  # False: `compile` does nothing, the route stays standard
        # Pooled: taking fresh pages costs as much as the fusion itself. A standard buffer comes back when
        # its session exists (onnxruntime copies the weights), a compiled one when its model is freed.
        self._buffers: queue.SimpleQueue[WeightBuffer] = queue.SimpleQueue()

    @property
    def route(self) -> str:
        return "compiled" if self.device is not None else "standard"

    def new_buffer(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """A zeroed weight file in the plain graph's external-data layout, and named float32 views into it."""
        buffer = np.zeros(self.external_size // 4, np.float32)
        views = {}
        for name, entry in self.layout.items():
            start, size = entry["offset"] // 4, int(np.prod(entry["shape"], dtype=np.int64))
            views[name] = buffer[start:start + size].reshape(entry["shape"])
        return buffer, views

    @contextmanager
    def weight_buffer(self) -> Iterator[WeightBuffer]:
        """A weight buffer in the current route's layout, valid inside the `with` or, once `open` gave it
        to a model, for that model's life."""
        device = self.device
        try:
            target = self._buffers.get_nowait()
        except queue.Empty:
            target = self._new_weight_buffer(device)
        if target.device is not device:  # pooled before the route changed
            target = self._new_weight_buffer(device)
        try:
            yield target
        finally:
            if not target.in_use:
                self._buffers.put(target)

    def fuse_and_fold(self, alpha: np.ndarray, target: WeightBuffer) -> None:
        """target <- the weights mixed with alpha [4, Q], batch norm folded into the convs, in the
        target's layout: what `open` runs."""
        if target.device is None:
            fuse_blocks(alpha, self.bases, target.rows)
            fold_batch_norm(target.params, target.folded)
        else:
            target.device.fuse_and_fold(alpha, target)

    def fused_weights(self, alpha: np.ndarray) -> dict[str, np.ndarray]:
        """Every weight of the network mixed with alpha [4, Q], by name, in new arrays (unfolded)."""
        target = self._new_weight_buffer(None)
        fuse_blocks(alpha, self.bases, target.rows)
        return target.params

    def open(self, target: WeightBuffer, head_weight: np.ndarray, head_bias: np.ndarray) -> Network:
        """A network running the folded weights in `target` and the head rows [K, C], [K]."""
        head = _head_inputs(head_weight, head_bias)
        if target.device is None:
            return Network(self._session(self.graph, self.external_file, target.data,
                                         ort.GraphOptimizationLevel.ORT_ENABLE_ALL), head)
        target.in_use = True
        network = Network(self.shared_session, {**target.feeds, **head})
        weakref.finalize(network, self._return_buffer, target)
        return network

    def _return_buffer(self, target: WeightBuffer) -> None:
        target.in_use = False
        self._buffers.put(target)

    def compile(self, alpha: np.ndarray) -> None:
        """Compile for this device (CPU only; tried once). The compiled route is kept only if a model
        personalized with `alpha` on it reproduces the standard route's."""
        if self.compile_tried:
            return
        self.compile_tried = True
        if self.providers != ["CPUExecutionProvider"]:  # the compiled graph is CPU-specific (NCHWc)
            return
        try:
            compiled = compile_backbone(self.graph, self.external_file, self.layout, self.external_size)
            if compiled is None:
                return
            device = reorder_bases(compiled, self.bases, self.block_layout, self.shapes)
            if device is None:
                return
            session = self._session(compiled.graph, COMPILED_FILE, compiled.constants,
                                    ort.GraphOptimizationLevel.ORT_DISABLE_ALL)  # it is optimized already
        except Exception:  # onnxruntime raises untyped errors; the standard route still works
            return
        x = np.random.default_rng(0).standard_normal([2, 3, self.input_size, self.input_size]).astype(np.float32)
        standard, compiled_target = self._folded(alpha, None), self._folded(alpha, device)
        head = standard.params["fc.weight"], standard.params["fc.bias"]
        expected = self.open(standard, *head).run(x)
        got = Network(session, {**compiled_target.feeds, **_head_inputs(*head)}).run(x)
        if np.allclose(got, expected, rtol=1e-4, atol=1e-4 * (float(np.abs(expected).max()) + 1)):
            self.device, self.shared_session = device, session

    def _folded(self, alpha: np.ndarray, device: DeviceBases | None) -> WeightBuffer:
        target = self._new_weight_buffer(device)
        self.fuse_and_fold(alpha, target)
        return target

    def _new_weight_buffer(self, device: DeviceBases | None) -> WeightBuffer:
        if device is not None:
            return device.new_buffer()
        rows = [np.empty(b.shape[1], np.float32) for b in self.bases]
        data, folded = self.new_buffer()
        return WeightBuffer(rows, unflatten(rows, self.block_layout, self.shapes), folded, data)

    def _session(self, graph: bytes, external_file: str, buffer: np.ndarray, level: ort.GraphOptimizationLevel
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
