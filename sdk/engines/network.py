"""A personalized network on onnxruntime: images in, logits out, in one session or in two run in turn.

`Network` is one backbone session ending in the task's classifier rows, which it is fed as inputs (with,
on the compiled route, the folded weights). `SplitNetwork` is a network whose graph was cut in two
(`sdk.format.onnx_proto.split_graph`): the first session's outputs are the second's inputs. An int8 model runs so
(`sdk.engines.int8_session`) because onnxruntime prepacks a session's int8 weights on one thread, and two halves'
sessions can be made at once, one per core.

>>> network = Network(session, head_inputs(head_weight, head_bias))   # doctest: +SKIP
>>> logits = network.run(images)                                       # doctest: +SKIP
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np
import onnxruntime as ort

FEATURES, LOGITS, HEAD_WEIGHT, HEAD_BIAS, IMAGE = "features", "logits", "head_weight", "head_bias", "image"


def head_inputs(weight: np.ndarray, bias: np.ndarray) -> dict[str, np.ndarray]:
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
        return self.run_feeds({IMAGE: np.ascontiguousarray(images, np.float32)})

    def run_feeds(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """[N, K] logits of these inputs (the image, or what a first half made of it), N their first dim."""
        # The weights are bound once per thread (passing 40 arrays with every run cost 0.08 ms, 20% of an
        # inference of the 64-px bench model; an IOBinding must not be shared between threads), and so is
        # an output array per batch size, which onnxruntime writes into instead of allocating its own
        # (64-px bench model: 0.317 vs 0.355 ms per image, ad-hoc A/B).
        state = self._per_thread
        if getattr(state, "binding", None) is None:
            state.binding, state.out = self.session.io_binding(), None
            for name, array in self.weights.items():
                state.binding.bind_cpu_input(name, array)
        count = len(next(iter(feeds.values())))
        if state.out is None or len(state.out) != count:
            state.out = np.empty((count, len(self.weights[HEAD_BIAS])), np.float32)
            state.binding.bind_output(LOGITS, "cpu", 0, np.float32, list(state.out.shape), state.out.ctypes.data)
        for name, array in feeds.items():
            state.binding.bind_cpu_input(name, array)
        self.session.run_with_iobinding(state.binding)
        return state.out.copy()  # the next run overwrites state.out

    def with_head(self, weight: np.ndarray, bias: np.ndarray) -> Network:
        """The same backbone (session and bound weights) with another head (`sdk.adapt`: every class)."""
        return Network(self.session, {**self.weights, **head_inputs(weight, bias)})


@dataclass
class SplitNetwork:
    """A network run as two sessions in turn: `first` takes the image and gives the `crossing` tensors,
    which `rest` (the second session, with the head rows) takes."""
    first: ort.InferenceSession
    crossing: list[str]
    rest: Network

    def run(self, images: np.ndarray) -> np.ndarray:
        """[N, K] logits of normalized [N, 3, H, W] float32 images."""
        middle = self.first.run(self.crossing, {IMAGE: np.ascontiguousarray(images, np.float32)})
        return self.rest.run_feeds(dict(zip(self.crossing, middle, strict=True)))

    def with_head(self, weight: np.ndarray, bias: np.ndarray) -> SplitNetwork:
        """The same backbone with another head (`sdk.adapt`: every class)."""
        return SplitNetwork(self.first, self.crossing, self.rest.with_head(weight, bias))
