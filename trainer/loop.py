"""The one training loop every stage uses: learning-rate schedule, progress bar with ETA, JSON-lines
log, and a checkpoint at the end of every epoch so a cut-off run resumes where it stopped.

Batches of epoch e come from a generator seeded by (run seed, stage, e), so a resumed epoch sees the
same batches as an uninterrupted one.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from . import distributed
from .config import TrainConfig


class JsonLog:
    def __init__(self, path: Path):
        self.path = path

    def write(self, solo: bool = False, **record) -> None:
        """Rank 0 writes; `solo` records come from a rank training alone (stage 2) and are written too."""
        if distributed.is_main() or solo:
            with self.path.open("a") as f:
                f.write(json.dumps({"time": round(time.time(), 1), **record}) + "\n")


def lr_scale(config: TrainConfig, progress: float, epoch: int, step: int = 0, warmup_steps: int = 0) -> float:
    """The schedule's factor at `progress` (share of the stage's steps done) in `epoch`, times a linear
    warm-up over the first `warmup_steps` steps (step counts from 0)."""
    warmup = min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0
    if config.schedule == "step":
        return warmup * 0.1 ** (epoch // config.step_every)
    return warmup * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def epoch_rng(config: TrainConfig, stage: str, epoch: int) -> np.random.Generator:
    stage_id = int.from_bytes(stage.encode()[:8].ljust(8, b"\0"), "little")
    return np.random.default_rng([config.stage_seed(stage), stage_id, epoch])


def _number(value):
    """A step's metric for the log: steps return tensors so that only logged steps wait for the device."""
    return round(value.item(), 6) if isinstance(value, torch.Tensor) else value


def run_epochs(stage_dir: Path, stage: str, config: TrainConfig, epochs: float, steps_per_epoch: int,
               make_batches: Callable[[np.random.Generator, int], Iterable],
               train_step: Callable[[object], dict], optimizer: torch.optim.Optimizer,
               stateful: dict[str, object], log: JsonLog, data_parallel: bool = True,
               warmup_epochs: float = 0.0) -> None:
    """Run round(epochs * steps_per_epoch) steps of `train_step`, resuming from stage_dir/checkpoint.pt;
    the learning rate follows `lr_scale`, warmed up over `warmup_epochs`.

    data_parallel=False: this rank trains alone (a stage-2 basis): it shows progress, writes its own
    checkpoints and never waits for the other ranks.
    """
    owner = distributed.is_main() or not data_parallel
    stage_dir.mkdir(parents=True, exist_ok=True)
    total = max(1, round(epochs * steps_per_epoch))
    warmup_steps = round(warmup_epochs * steps_per_epoch)
    checkpoint = stage_dir / "checkpoint.pt"
    start_epoch = 0
    if checkpoint.exists():
        state = torch.load(checkpoint, weights_only=True, map_location="cpu")  # load_state_dict moves it back
        for name, obj in stateful.items():
            obj.load_state_dict(state[name])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = state["epoch"]
    step = min(total, start_epoch * steps_per_epoch)
    base_lrs = [group.setdefault("base_lr", group["lr"]) for group in optimizer.param_groups]
    bar = tqdm(total=total, initial=step, desc=stage, unit="step", disable=not owner,
               mininterval=2.0, dynamic_ncols=True)
    epoch = start_epoch
    while step < total:
        n = min(steps_per_epoch, total - step)
        started, seen = time.perf_counter(), 0
        for batch in make_batches(epoch_rng(config, stage, epoch), n):
            scale = lr_scale(config, step / total, epoch, step, warmup_steps)
            for group, base in zip(optimizer.param_groups, base_lrs, strict=True):
                group["lr"] = base * scale
            metrics = train_step(batch)
            step += 1
            seen += metrics.pop("images", 0)
            bar.update()
            if step % config.log_every == 0 or step == total:
                metrics = {k: _number(v) for k, v in metrics.items()}
                bar.set_postfix(loss=f"{metrics['loss']:.3f}")
                log.write(solo=not data_parallel, stage=stage, step=step, epoch=epoch, lr=base_lrs[0] * scale,
                          **metrics)
        epoch += 1
        log.write(solo=not data_parallel, stage=stage, event="epoch_end", epoch=epoch, step=step,
                  images_per_s=round(seen * (distributed.world_size() if data_parallel else 1)
                                     / (time.perf_counter() - started), 1))
        if owner:
            state = {name: obj.state_dict() for name, obj in stateful.items()}
            state.update(optimizer=optimizer.state_dict(), epoch=epoch)
            tmp = checkpoint.with_suffix(".tmp")
            torch.save(state, tmp)
            tmp.replace(checkpoint)
        if data_parallel:
            distributed.barrier()
    bar.close()
