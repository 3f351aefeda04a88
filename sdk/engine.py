"""The inference engine: onnxruntime sessions of the backbone graph with injected weights.

Weights go in through `SessionOptions.add_external_initializers_from_files_in_memory`, with the graph
given as bytes. (`add_initializer` is silently wrong at the default optimization level: the NCHWc
layout transformer ignores overridden conv weights. Weights as graph inputs are correct but cost
35-45% latency.) Execution providers are picked from what is installed (TensorRT, CUDA, else CPU).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnxruntime as ort

from .errors import SdkError

PREFERRED_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CoreMLExecutionProvider",
                       "CPUExecutionProvider")


def default_providers() -> list[str]:
    available = set(ort.get_available_providers())
    return [p for p in PREFERRED_PROVIDERS if p in available] or ["CPUExecutionProvider"]


class BackboneEngine:
    def __init__(self, graph: bytes, external_file: str, external_size: int, layout: dict[str, dict],
                 providers: Sequence[str] | None = None, threads: int | None = None):
        self.graph, self.external_file, self.external_size = graph, external_file, external_size
        self.layout = layout
        self.providers = list(providers) if providers else default_providers()
        self.threads = threads

    def new_buffer(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """A zeroed weight buffer in the graph's external-data layout, and named float32 views into it."""
        buffer = np.zeros(self.external_size // 4, np.float32)
        views = {}
        for name, entry in self.layout.items():
            start, size = entry["offset"] // 4, int(np.prod(entry["shape"], dtype=np.int64))
            views[name] = buffer[start:start + size].reshape(entry["shape"])
        return buffer, views

    def session(self, buffer: np.ndarray) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if self.threads:
            options.intra_op_num_threads = self.threads
        raw = buffer.view(np.uint8)
        options.add_external_initializers_from_files_in_memory([self.external_file], [raw], [raw.nbytes])
        try:
            return ort.InferenceSession(self.graph, options, providers=self.providers)
        except Exception as e:  # onnxruntime raises untyped errors for bad graphs
            raise SdkError(f"backbone graph could not be loaded: {e}") from None
