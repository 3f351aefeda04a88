"""Training throughput of ResNet-18 on this machine (images/s of SGD steps on random data).

    python -m trainer throughput --width 0.5 0.25 --size 64 --batch 128
"""

from __future__ import annotations

import statistics
import time

import torch

from .models import ResNet18, ResNetConfig


def measure_training_throughput(width: float, stem: str = "imagenet", size: int = 64, batch: int = 128,
                                steps: int = 8, warmup: int = 2, num_classes: int = 200) -> dict:
    """Median images/s over `steps` SGD steps (after `warmup`), with torch's current thread count."""
    model = ResNet18(ResNetConfig(stem=stem, width=width, num_classes=num_classes, input_size=size)).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, num_classes, (batch,))
    times = []
    for step in range(warmup + steps):
        start = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step >= warmup:
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    return {"width": width, "stem": stem, "size": size, "batch": batch, "threads": torch.get_num_threads(),
            "step_ms_median": round(median * 1000, 1), "images_per_s": round(batch / median, 1)}
