"""`python -m lab bases RUN`: are a run's stage-2 bases specialists? (issue 12's diagnostics, on runs that
need neither stage 3 nor the baseline.) Moved from the trainer: it measures the method, it is not part of it."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from trainer.basis_bank import BasisBank
from trainer.checkpoints import load_state
from trainer.config import TrainConfig
from trainer.data.errors import DataError
from trainer.data.tasks import TaskSampler
from trainer.evaluate import Evaluator
from trainer.headroom import (
    best_single_basis,
    best_single_basis_crossval,
    majority_shard_accuracy,
    mean_margin,
    shards_per_task,
    specialist_margins,
)
from trainer.models import NUM_BLOCKS
from trainer.report import _mixer_accuracy, _per_basis_mean, _rounded, _router_accuracy
from trainer.run import load_model, load_taper, make_context, read_shards
from trainer.rundir import RunDir


def evaluate_bases(run_dir: Path, progress: bool = True, seeds: list[int] | None = None,
                   task_mode: str = "neighbourhood", device: torch.device | str = "cpu") -> dict:
    """Stage-2 diagnostics of a run that needs neither stage 3 nor the baseline (issue 12's part 2):
    each basis's specialist margin, the best single basis, and the uniform average and shard router
    of the stage-2 bases, against classifier selection with the baseline (or, without one, with the
    stage-1 network: the bench measured them 0.08 apart), on the tasks of every seed: neighbourhood
    tasks (the paper protocol) or, with `task_mode="supercategory"`, super-category tasks (the issue's
    "not below classifier selection" check, which the full report needs a baseline for).
    With a finished stage 3 also TAPER and the uniform average and shard router of its bases.
    The networks run on `device` (float32); the bases are mixed on the CPU."""
    run = RunDir(run_dir)
    config = TrainConfig.load(run.config)
    ctx = make_context(run_dir, config, progress)
    evaluator = Evaluator(ctx.data, ctx.model_config, ctx.preprocessing, config.eval_images_per_class,
                          device=device)
    has_baseline = run.model("baseline").exists()
    reference = load_model(ctx.model_config, run.reference_model())
    bases = [load_state(run.basis(q)) for q in range(config.num_bases)]
    members = read_shards(run_dir, config.num_bases)
    bank = BasisBank.from_state_dicts(ctx.model_config, bases)
    uniform = torch.full((NUM_BLOCKS, config.num_bases), 1.0 / config.num_bases)
    if task_mode not in ("neighbourhood", "supercategory"):
        raise DataError(f"task_mode must be 'neighbourhood' or 'supercategory', got {task_mode!r}")
    try:
        sampler = TaskSampler(ctx.data.hierarchy, k=config.task_k, mode=task_mode)
    except ValueError as error:  # e.g. a data set without super-categories
        raise DataError(f"{run_dir}: {error}") from error
    start = time.perf_counter()
    reference_logits = evaluator.logits(reference.state_dict())
    basis_logits = [evaluator.logits(b) for b in bases]
    uniform_logits = evaluator.logits(bank.state_dict_for(uniform))
    taper = None  # with a finished stage 3: TAPER, and the uniform average and router of its bases
    if run.stage3_model().exists():
        taper, embedder = load_taper(ctx, run_dir)
        taper_uniform_logits = evaluator.logits(taper.bank.state_dict_for(uniform))
    rows: dict[str, list[float]] = {}
    margins, alignment = [], []
    seeds = list(config.eval_seeds if seeds is None else seeds)
    for seed in seeds:
        tasks = sampler.evaluation_tasks(seed)
        for name, value in (("reference", evaluator.static(reference_logits, tasks)[0]),
                            ("shard_basis", majority_shard_accuracy(evaluator, basis_logits, members, tasks)),
                            ("best_single_basis", best_single_basis(evaluator, basis_logits, tasks)),
                            ("best_single_basis_crossval", best_single_basis_crossval(evaluator, basis_logits,
                                                                                      tasks)),
                            ("uniform_average", evaluator.static(uniform_logits, tasks)[0]),
                            ("shard_router", _router_accuracy(evaluator, bank, members, tasks))):
            rows.setdefault(name, []).append(value)
        if taper is not None:
            for name, value in (
                    ("taper", _mixer_accuracy(evaluator, taper, embedder(tasks), tasks)[0]),
                    ("stage3_uniform_average", evaluator.static(taper_uniform_logits, tasks)[0]),
                    ("stage3_shard_router", _router_accuracy(evaluator, taper.bank, members, tasks))):
                rows.setdefault(name, []).append(value)
        margins.append(specialist_margins(evaluator, basis_logits, reference_logits, members, tasks))
        alignment.append(shards_per_task(members, tasks))
        if progress:
            print(f"[bases] seed {seed}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in rows.items()), flush=True)
    per_basis = _per_basis_mean(margins)
    return {
        "reference": "classifier_selection" if has_baseline else "stage1_selection",
        "accuracy": {k: round(float(np.mean(v)), 2) for k, v in rows.items()},
        "accuracy_std": {k: round(float(np.std(v)), 2) for k, v in rows.items()},
        "specialist_margin": round(mean_margin(per_basis), 2),
        "specialist_margin_per_basis": [_rounded(m) for m in per_basis],
        "task_shard_alignment": {k: round(float(np.mean([a[k] for a in alignment])), 3) for k in alignment[0]},
        "seeds": seeds,
        "task_mode": task_mode,
        "eval_time_s": round(time.perf_counter() - start, 1),
        "config": config.to_dict(),
    }
