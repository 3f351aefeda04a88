"""Training throughput of ResNet-18 on this machine (images/s of SGD steps on random data).

    python -m trainer throughput --width 0.5 0.25 --size 64 --batch 128
"""

from __future__ import annotations

import statistics
import time

import torch

from .device import CPU, TrainDevice
from .models import ResNet18, ResNetConfig


def _timed(fn, device: TrainDevice) -> float:
    """Seconds of one call of `fn`, waiting for the GPU's queued work on CUDA."""
    start = time.perf_counter()
    fn()
    if device.is_cuda:
        torch.cuda.synchronize(device.device)
    return time.perf_counter() - start


def measure_training_throughput(width: float, stem: str = "imagenet", size: int = 64, batch: int = 128,
                                steps: int = 8, warmup: int = 2, num_classes: int = 200,
                                device: TrainDevice = CPU) -> dict:
    """Median images/s over `steps` SGD steps (after `warmup`), with torch's current thread count, on
    `device` (channels-last; bf16 autocast where the device has it on, as training does)."""
    model = ResNet18(ResNetConfig(stem=stem, width=width, num_classes=num_classes, input_size=size))
    model = model.to(device.device, memory_format=torch.channels_last).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(batch, 3, size, size, device=device.device).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, num_classes, (batch,), device=device.device)

    def step():
        with device.autocast():
            loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    times = [_timed(step, device) for _ in range(warmup + steps)][warmup:]
    median = statistics.median(times)
    return {"width": width, "stem": stem, "size": size, "batch": batch, "threads": torch.get_num_threads(),
            "device": device.describe(), "step_ms_median": round(median * 1000, 2),
            "images_per_s": round(batch / median, 1)}


def measure_stage3_ratio(width: float = 0.25, stem: str = "imagenet", size: int = 64, batch: int = 128,
                         groups: int = 4, num_bases: int = 10, num_classes: int = 200, steps: int = 8,
                         warmup: int = 2, device: TrainDevice = CPU) -> dict:
    """Median time of a full stage-3 step (mixer, fusion of Q bases, grouped forward/backward, SGD,
    running-statistics update) over a plain stage-1 step, same batch size, same threads, one run."""
    import numpy as np

    from .config import check_tasks_per_batch

    check_tasks_per_batch(groups, batch)

    from .basis_bank import BasisBank
    from .mixer import MixerPredictor
    from .stages import Stage3Model, task_mask

    config = ResNetConfig(stem=stem, width=width, num_classes=num_classes, input_size=size)
    dev = device.device
    plain = ResNet18(config).to(dev, memory_format=torch.channels_last).train()
    plain_opt = torch.optim.SGD(plain.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    bank = BasisBank.from_state_dicts(config, [ResNet18(config).state_dict() for _ in range(num_bases)])
    model = Stage3Model(bank, MixerPredictor(384, num_bases)).to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(batch, 3, size, size, device=dev)
    y = torch.randint(0, num_classes, (batch,), device=dev)
    tasks = [np.sort(np.random.default_rng(g).choice(num_classes, 20, replace=False)) for g in range(groups)]
    y_task = torch.stack([torch.from_numpy(t[np.random.default_rng(g).integers(0, 20, batch // groups)])
                          for g, t in enumerate(tasks)]).to(dev)
    mask = task_mask(tasks, num_classes)[:, None, :].to(dev)
    embedding = torch.randn(groups, 384, device=dev)

    def plain_step():
        with device.autocast():
            loss = torch.nn.functional.cross_entropy(plain(x.contiguous(memory_format=torch.channels_last)), y)
        plain_opt.zero_grad(set_to_none=True)
        loss.backward()
        plain_opt.step()

    def stage3_step():
        with device.autocast():
            logits, alpha, stats = model(x.view(groups, batch // groups, 3, size, size), embedding)
            loss = torch.nn.functional.cross_entropy((logits + mask).reshape(-1, num_classes), y_task.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        bank.update_running_stats(alpha, stats)

    times: dict[str, list[float]] = {"stage1": [], "stage3": []}
    for step in range(warmup + steps):  # interleaved, so machine noise hits both alike
        for name, fn in (("stage1", plain_step), ("stage3", stage3_step)):
            seconds = _timed(fn, device)
            if step >= warmup:
                times[name].append(seconds)
    s1, s3 = statistics.median(times["stage1"]), statistics.median(times["stage3"])
    return {"width": width, "size": size, "batch": batch, "tasks_per_batch": groups, "num_bases": num_bases,
            "threads": torch.get_num_threads(), "device": device.describe(), "stage1_step_ms": round(s1 * 1000, 1),
            "stage3_step_ms": round(s3 * 1000, 1), "stage3_over_stage1": round(s3 / s1, 2)}
