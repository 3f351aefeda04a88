"""Issue 12 experiment: is a softer majority-shard routing better than the sharp pick?

The `bench-narrow` mixer is fitted to the task's majority shard smoothed 0.05 toward uniform. This
scores alpha = (1 - s) * one-hot(majority shard) + s * uniform (`smooth_toward_uniform`), every block,
for several smoothings s, on a run's stage-2 bases and the same tasks `trainer bases` uses
(classifier selection, val images):

    python -m lab.routing_smoothing --run runs/narrow --smoothing 0 0.1 0.25 0.5 1 \
        --out docs/results/routing_smoothing.json

s = 0 is the majority-shard basis alone, s = 1 the uniform average of the bases.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from trainer.basis_bank import BasisBank
from trainer.checkpoints import load_state
from trainer.config import TrainConfig
from trainer.data.tasks import TaskSampler
from trainer.evaluate import Evaluator
from trainer.headroom import majority_shard_alpha
from trainer.mixer import smooth_toward_uniform
from trainer.models import NUM_BLOCKS
from trainer.run import make_context, read_shards
from trainer.rundir import RunDir


def smoothed_alpha(members: np.ndarray, task: np.ndarray, smoothing: float) -> torch.Tensor:
    """[NUM_BLOCKS, Q]: the majority shard's one-hot, moved `smoothing` of the way to uniform.

    >>> smoothed_alpha(np.eye(2), np.array([1]), 0.5)[0].tolist()
    [0.25, 0.75]
    """
    alpha = smooth_toward_uniform(majority_shard_alpha(members, task), smoothing)
    return torch.from_numpy(alpha).float().expand(NUM_BLOCKS, -1)


def score_run(run_dir: Path, smoothings: list[float], seeds: list[int]) -> dict:
    config = TrainConfig.load(RunDir(run_dir).config)
    ctx = make_context(run_dir, config, progress=False)
    evaluator = Evaluator(ctx.data, ctx.model_config, ctx.preprocessing, config.eval_images_per_class)
    bank = BasisBank.from_state_dicts(ctx.model_config, [load_state(RunDir(run_dir).basis(q))
                                                         for q in range(config.num_bases)])
    members = read_shards(run_dir, config.num_bases)
    sampler = TaskSampler(ctx.data.hierarchy, k=config.task_k, mode="neighbourhood")
    start = time.perf_counter()
    rows = {}
    for s in smoothings:
        per_seed = [evaluator.per_task(lambda i, task, s=s: bank.state_dict_for(smoothed_alpha(members, task, s)),
                                       sampler.evaluation_tasks(seed))[0] for seed in seeds]
        rows[f"{s:g}"] = {"mean": round(float(np.mean(per_seed)), 2), "per_seed": [round(v, 2) for v in per_seed]}
        print(f"[smoothing] {run_dir.name} s={s:g}: {rows[f'{s:g}']}", flush=True)
    return {"accuracy": rows, "seeds": seeds, "eval_time_s": round(time.perf_counter() - start, 1),
            "stage2_epochs": config.stage2_epochs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, action="append", required=True, help="a run with stage 2 (repeatable)")
    parser.add_argument("--smoothing", type=float, nargs="+", default=[0.0, 0.1, 0.25, 0.5, 1.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    result = {str(run): score_run(run, args.smoothing, args.seeds) for run in args.run}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
