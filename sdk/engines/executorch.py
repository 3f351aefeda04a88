"""ExecuTorch as the backbone engine: `sdk.load(path, engine="executorch")`.

A third route (`sdk.engines.onnxruntime.Route`) beside onnxruntime's two: its weight buffers hold a copy of the
companion's program (`sdk.engines.xnnpack_program`), and the fusion plan writes each folded weight straight into
the program's slot for it, in the program's own layout (channels-last convolutions); `open` hands a copy of
those bytes to ExecuTorch (its Python API takes `bytes` only) and returns a network that runs the program
for features and applies the task's head in numpy. XNNPACK packs the weights at the first inference, not
at load: that inference is slower than the next ones (docs/results/engines.md).

Needs the `executorch` package, which imports torch: an optional engine for checking what an app's
ExecuTorch runtime will compute, and for timing it; onnxruntime stays the default.

>>> bundle = sdk.load("tiny-imagenet.taper", engine="executorch")   # doctest: +SKIP
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from sdk.engines.onnxruntime import StandardRoute
from sdk.engines.xnnpack_program import Companion, Slot
from sdk.errors import BundleError, SdkError
from sdk.fusion.bases import CompactBases
from sdk.fusion.plan import FusionPlan, Placement, WeightBuffer


def _loader():
    try:
        import torch

        # The native module itself, which `portable_lib` re-exports after importing executorch.exir for a
        # warning: torch then the module 2.7 s, through portable_lib 8.1 s (a first ExecuTorch load; this CPU,
        # 2026-11-29). sdk/engines/companion_probe.py loads programs the same way.
        from executorch.extension.pybindings._C import _load_for_executorch_from_buffer
    except ImportError as e:
        raise SdkError(f"engine='executorch' needs executorch (pip install 'taper-sdk[export]'): {e}") from None
    return torch, _load_for_executorch_from_buffer


@dataclass
class ExecutorchNetwork:
    """A loaded XNNPACK program (features) and the task's head rows; runs batches of up to max_batch."""
    module: Any
    program: bytes               # the bytes the module reads its weights from (ExecuTorch keeps a pointer)
    head_weight: np.ndarray
    head_bias: np.ndarray
    max_batch: int
    torch: Any = field(repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def run(self, images: np.ndarray) -> np.ndarray:
        """[N, K] logits of normalized [N, 3, H, W] float32 images."""
        images = np.ascontiguousarray(images, np.float32)
        pieces = []
        with self._lock:  # one ExecuTorch method is not meant to run on two threads at once
            for i in range(0, len(images), self.max_batch):
                try:
                    out = self.module.forward([self.torch.from_numpy(images[i:i + self.max_batch])])[0]
                except RuntimeError as e:   # e.g. a companion header whose max_batch is above the program's
                    raise BundleError(f"the ExecuTorch companion's program failed to run: {e}") from None
                pieces.append(out.numpy())
        features = np.concatenate(pieces) if pieces else np.zeros((0, self.head_weight.shape[1]), np.float32)
        return features @ self.head_weight.T + self.head_bias

    def with_head(self, weight: np.ndarray, bias: np.ndarray) -> ExecutorchNetwork:
        """The same loaded program with another head (`sdk.adapt`: every class)."""
        return replace(self, head_weight=np.ascontiguousarray(weight, np.float32),
                       head_bias=np.ascontiguousarray(bias, np.float32), _lock=threading.Lock())


class ExecutorchRoute:
    """Fusion into a copy of the companion program, at its slots, then the program loaded."""
    name = "executorch"

    def __init__(self, companion: Companion, standard: StandardRoute, bases: CompactBases):
        self.companion = companion
        self.placements = {name: program_placement(p, companion.slots[name]) for name, p in standard.placements.items()}
        graph_floats = -(-len(companion.program) // 4)
        self.plan = FusionPlan.build(bases, self.placements, graph_floats, standard.plan.kernel, tile_floats=None)
        self.torch, self.load = _loader()

    def new_buffer(self) -> WeightBuffer:
        return self.plan.new_buffer(self, template=self.companion.program)

    def fuse_and_fold(self, alpha: np.ndarray, target: WeightBuffer) -> None:
        self.plan.fuse_and_fold(alpha, target)

    def open(self, target: WeightBuffer, head_weight: np.ndarray, head_bias: np.ndarray) -> ExecutorchNetwork:
        program = target.graph_data.view(np.uint8)[:len(self.companion.program)].tobytes()
        try:
            module = self.load(program)
            module.method_meta("forward")  # fails here, typed, for a program without a forward method
        except Exception as e:  # ExecuTorch raises RuntimeError for programs it cannot load
            raise BundleError(f"the ExecuTorch companion's program could not be loaded: {e}") from None
        return ExecutorchNetwork(module, program, np.ascontiguousarray(head_weight, np.float32),
                                 np.ascontiguousarray(head_bias, np.float32), self.companion.max_batch, self.torch)


def program_placement(plain: Placement, slot: Slot) -> Placement:
    """Where a folded weight lies in the program: at its slot, its axes permuted as the slot says."""
    identity = slot.axes == tuple(range(len(plain.shape)))
    return Placement(plain.name, plain.shape, slot.offset // 4, None if identity else (plain.shape, slot.axes))
