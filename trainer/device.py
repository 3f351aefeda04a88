"""Where training runs: the CPU (the default: the tests, the bench and demo presets) or a CUDA GPU.

A run's recipe (TrainConfig) does not say where it runs, so a run directory trained on one resumes and
evaluates on the other. On CUDA: the decoded training set is copied to the GPU once (1.2 GB for Tiny
ImageNet; a run over conditions copies each condition's too) and batches are gathered there, networks
are channels-last, and forward passes run under bf16 autocast (weights, optimizer state and checkpoints
stay float32). Batches and augmentation draws
come from the same CPU generators on both devices, so a CUDA run sees the same images in the same order
as a CPU run of its recipe.

>>> TrainDevice.parse("cpu").bf16
False
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TrainDevice:
    device: torch.device
    bf16: bool = False             # bf16 autocast of forward passes (on CUDA by default)
    data_on_device: bool = False   # the training split copied to `device` once (on CUDA); on the CPU the
                                   # tests set it to run the CUDA path's data handling without a GPU

    @classmethod
    def parse(cls, name: str = "cpu", bf16: bool | None = None) -> TrainDevice:
        """'cpu', 'cuda' or 'cuda:N'; bf16 defaults to on for CUDA, off for the CPU. Under torchrun,
        'cuda' is the process's own GPU (cuda:LOCAL_RANK)."""
        try:
            device = torch.device(name)
        except RuntimeError:
            raise ValueError(f"device must be cpu or cuda, got {name!r}") from None
        if device.type not in ("cpu", "cuda"):
            raise ValueError(f"device must be cpu or cuda, got {name!r}")
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError("--device cuda: torch sees no CUDA GPU on this machine")
        if device.type == "cuda" and device.index is None and "LOCAL_RANK" in os.environ:
            device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        if device.type == "cuda":
            torch.backends.cudnn.benchmark = True    # fixed input shapes: pick the fastest conv algorithms once
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        cuda = device.type == "cuda"
        return cls(device, cuda if bf16 is None else bf16, data_on_device=cuda)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def distributed_backend(self) -> str:
        """torch.distributed's backend for ranks training on this kind of device."""
        return "nccl" if self.is_cuda else "gloo"

    def make_current(self) -> None:
        """Make a numbered GPU (a torchrun rank's cuda:LOCAL_RANK) the process's current one. A bare
        'cuda' is left alone: torch 2.11 refuses torch.cuda.set_device on it (the H100 run of
        2026-11-26 stopped there), and it already means the current GPU."""
        if self.is_cuda and self.device.index is not None:
            torch.cuda.set_device(self.device)

    def autocast(self) -> contextlib.AbstractContextManager:
        """bf16 autocast for a forward pass and its loss (a no-op context when bf16 is off)."""
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16)

    def describe(self) -> str:
        """For reports: 'cpu' or 'cuda (NVIDIA H200), bf16 autocast'."""
        return device_name(self.device) + (", bf16 autocast" if self.bf16 else "")


CPU = TrainDevice(torch.device("cpu"))


def device_name(device: torch.device) -> str:
    """'cpu', or 'cuda (NVIDIA H200)' with the GPU's own name."""
    return f"cuda ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else device.type


def host_to(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A small CPU tensor (batch indices, augmentation draws, a task mask) on `device`. To a GPU it goes
    from pinned memory without blocking: a plain copy from pageable memory waits for the GPU's queue,
    so the CPU could not prepare the next step while the GPU runs this one."""
    if device.type != "cuda" or tensor.device.type == "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)
