"""Distributed training through the standard engine: `torchrun` + DistributedDataParallel.

gloo on CPU, nccl on GPUs (one per process: `--device cuda` is cuda:LOCAL_RANK). Without torchrun (no
WORLD_SIZE) everything runs in one process.

    torchrun --nproc-per-node 2 -m trainer run --preset tiny --out runs/tiny
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def init(backend: str = "gloo") -> None:
    """Join the torchrun group (no-op alone): gloo for CPU training, nccl for GPU training
    (`TrainDevice.distributed_backend`); a machine with a GPU can still train on its CPU."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        dist.init_process_group(backend)


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def is_main() -> bool:
    return rank() == 0


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def wrap(module: torch.nn.Module) -> torch.nn.Module:
    """DDP-wrapped module when distributed, else the module itself."""
    if not dist.is_initialized():
        return module
    return torch.nn.parallel.DistributedDataParallel(module, broadcast_buffers=True)


def unwrap(module: torch.nn.Module) -> torch.nn.Module:
    return module.module if isinstance(module, torch.nn.parallel.DistributedDataParallel) else module
