"""Where a run's trained mixer sends the evaluation tasks: per mixer block, how many tasks put their
largest weight on each basis, the mean of that largest weight, and how often it is the basis of the
task's majority shard. A sharp mixer that sends every task to one basis is one network, not a router
(issue 12: `stage3_route_entropy`). Also, per block, how far apart the final bases are (`basis_spread`).

    python -m lab.routing_usage /root/taper-runs/bench /root/taper-runs/bench-route1 --seed 0
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from trainer.config import TrainConfig
from trainer.data.tasks import TaskSampler
from trainer.headroom import majority_shard
from trainer.models import NUM_BLOCKS
from trainer.run import load_taper, make_context, read_shards
from trainer.rundir import RunDir


def routing_usage(alpha: np.ndarray, majority: np.ndarray) -> list[dict]:
    """alpha [T, 4, Q], majority [T] (each task's majority-shard basis) -> one summary per block."""
    top = alpha.argmax(-1)
    return [{"tasks_per_basis": np.bincount(top[:, b], minlength=alpha.shape[-1]).tolist(),
             "bases_used": int(np.count_nonzero(np.bincount(top[:, b]))),
             "mean_top_weight": round(float(alpha[:, b].max(-1).mean()), 3),
             "top_is_majority_shard": round(float((top[:, b] == majority).mean()), 3)} for b in range(NUM_BLOCKS)]


def basis_spread(params: np.ndarray) -> float:
    """params [Q, P], one block of the bank -> mean over bases of ||W_q - W_mean|| / ||W_mean||:
    0 for copies; the bench's stage 3 leaves 0.02-0.05."""
    params = params.astype(np.float64)
    mean = params.mean(0)
    return float(np.linalg.norm(params - mean, axis=1).mean() / np.linalg.norm(mean))


def run_usage(run_dir: Path, seed: int) -> dict:
    config = TrainConfig.load(RunDir(run_dir).config)
    ctx = make_context(run_dir, config, progress=False)
    model, embedder = load_taper(ctx, run_dir)
    tasks = TaskSampler(ctx.data.hierarchy, k=config.task_k).evaluation_tasks(seed)
    members = read_shards(run_dir, config.num_bases)
    with torch.no_grad():
        alpha = model.mixer(embedder(tasks)).numpy()
    majority = np.array([majority_shard(members, t) for t in tasks])
    blocks = routing_usage(alpha, majority)
    for b, block in enumerate(blocks):
        block["basis_spread"] = round(basis_spread(model.bank.params(b).detach().numpy()), 4)
    return {"run": str(run_dir), "seed": seed, "tasks": len(tasks), "blocks": blocks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--seed", type=int, default=0, help="evaluation task seed")
    parser.add_argument("--out", type=Path, help="write the list of results here as JSON")
    args = parser.parse_args()
    text = json.dumps([run_usage(run_dir, args.seed) for run_dir in args.runs], indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
