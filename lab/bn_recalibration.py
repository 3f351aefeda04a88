"""Do mixtures of bases lose because of their mixed batch-norm statistics? (issue 12)

A mixed network normalises with the mix of its bases' running statistics, which are not the statistics of
its own activations. For each run: classifier-selection accuracy of the stage-1 network, the majority-shard
basis, the uniform average and the shard router's mixtures, each with its stored (mixed) statistics and with
statistics recomputed under its own weights on training images without augmentation (10 per class for a
task-independent network; per task, the task's classes' first 50 training images each).

    python -m lab.bn_recalibration /root/taper-runs/narrow-e80 --out docs/results/bn_recalibration.json
    python -m lab.bn_recalibration /root/taper-runs/bench-route1 --bases stage3   # the bases after stage 3
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from trainer.basis_bank import NUM_BLOCKS, BasisBank
from trainer.checkpoints import load_state
from trainer.config import TrainConfig
from trainer.data.tasks import TaskSampler
from trainer.data.transforms import to_normalized_tensor
from trainer.evaluate import Evaluator
from trainer.headroom import majority_shard, shard_router_alpha
from trainer.models import ResNet18
from trainer.run import load_taper, make_context, read_shards
from trainer.rundir import RunDir


@torch.no_grad()
def recalibrated(model: ResNet18, state: dict[str, torch.Tensor], x: torch.Tensor) -> dict[str, torch.Tensor]:
    """`state` with every batch norm's running mean and variance replaced by the statistics of its input
    over the images `x` (normalised [N, 3, H, W], one batch) when the network runs with `state`'s weights."""
    model.load_state_dict(state)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None   # a cumulative average: over one batch, exactly that batch's statistics
    model.train()
    model(x)
    model.eval()
    return {k: v.clone() for k, v in model.state_dict().items()}


def per_class_images(split, classes, per_class: int, preprocessing) -> torch.Tensor:
    index = np.concatenate([np.flatnonzero(split.labels == c)[:per_class] for c in classes])
    return to_normalized_tensor(split.take(index)[0], preprocessing)


def load_bases(ctx, run_dir: Path, stage: str) -> list[dict[str, torch.Tensor]]:
    """The run's Q bases as plain ResNet18 state dicts: as stage 2 wrote them, or as stage 3 left them."""
    if stage == "stage2":
        return [load_state(RunDir(run_dir).basis(q)) for q in range(ctx.config.num_bases)]
    bank = load_taper(ctx, run_dir)[0].bank
    return [bank.basis_state_dict(q) for q in range(bank.num_bases)]


def measure(run_dir: Path, seeds: list[int], per_class_all: int, per_class_task: int,
            stage: str = "stage2", static_only: bool = False) -> dict:
    """static_only: only the task-independent rows (the networks that are the same for every task: stored
    and recomputed statistics), minutes where the per-task rows take a quarter of an hour a run here."""
    config = TrainConfig.load(RunDir(run_dir).config)
    ctx = make_context(run_dir, config, progress=False)
    data, cfg = ctx.data, ctx.model_config
    evaluator = Evaluator(data, cfg, ctx.preprocessing)
    model = ResNet18(cfg)
    bases = load_bases(ctx, run_dir, stage)
    bank = BasisBank.from_state_dicts(cfg, bases)
    members = read_shards(run_dir, config.num_bases)
    reference = load_state(RunDir(run_dir).reference_model())
    stage1 = load_state(RunDir(run_dir).model("stage1"))
    uniform = bank.state_dict_for(torch.full((NUM_BLOCKS, config.num_bases), 1.0 / config.num_bases))
    all_x = per_class_images(data.train, range(data.num_classes), per_class_all, ctx.preprocessing)

    def recal_all(state):
        return recalibrated(model, state, all_x)

    def router_state(task):
        alpha = torch.from_numpy(shard_router_alpha(members, task)).float()
        return bank.state_dict_for(alpha.expand(NUM_BLOCKS, -1))

    def on_task_images(state_for):
        def build(i, task):
            return recalibrated(model, state_for(task), per_class_images(data.train, task, per_class_task,
                                                                           ctx.preprocessing))
        return build

    static = {"reference_cs": reference, "stage1": stage1, "uniform": uniform}
    static_logits = {k: evaluator.logits(v) for k, v in static.items()}
    static_recal = {k: evaluator.logits(recal_all(v)) for k, v in static.items() if k != "reference_cs"}
    basis_logits = [] if static_only else [evaluator.logits(b) for b in bases]
    rows: dict[str, list[float]] = {}

    def add(name, value):
        rows.setdefault(name, []).append(value)

    start = time.perf_counter()
    for seed in seeds:
        tasks = TaskSampler(data.hierarchy, k=config.task_k).evaluation_tasks(seed)
        for k, logits in static_logits.items():
            add(f"{k}", evaluator.static(logits, tasks)[0])
        for k, logits in static_recal.items():
            add(f"{k} | recomputed, all classes", evaluator.static(logits, tasks)[0])
        if not static_only:
            add("majority basis", evaluator.accumulate(
                tasks, lambda i, t, idx: basis_logits[majority_shard(members, t)][idx])[0])
            add("majority basis | recomputed, task images", evaluator.per_task(
                on_task_images(lambda t: bases[majority_shard(members, t)]), tasks)[0])
            add("stage1 | recomputed, task images", evaluator.per_task(on_task_images(lambda t: stage1), tasks)[0])
            add("shard router", evaluator.per_task(lambda i, t: router_state(t), tasks)[0])
            add("shard router | recomputed, all classes", evaluator.per_task(lambda i, t: recal_all(router_state(t)),
                                                                            tasks)[0])
            add("shard router | recomputed, task images", evaluator.per_task(on_task_images(router_state), tasks)[0])
        print(f"[{run_dir.name}] seed {seed}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in rows.items()), flush=True)
    return {"run": str(run_dir), "bases": stage, "static_only": static_only, "seeds": seeds,
            "images_per_class_all": per_class_all,
            "images_per_class_task": per_class_task, "seconds": round(time.perf_counter() - start, 1),
            "accuracy": {k: round(float(np.mean(v)), 2) for k, v in rows.items()},
            "accuracy_per_seed": {k: [round(x, 2) for x in v] for k, v in rows.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--per-class-all", type=int, default=10)
    parser.add_argument("--per-class-task", type=int, default=50)
    parser.add_argument("--bases", choices=("stage2", "stage3"), default="stage2",
                        help="the bases as stage 2 wrote them (default) or as stage 3 left them")
    parser.add_argument("--static-only", action="store_true",
                        help="only the stage-1 network and the uniform average (no per-task rows)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(2)
    results = [measure(r, args.seeds, args.per_class_all, args.per_class_task, args.bases,
                       args.static_only) for r in args.runs]
    text = json.dumps({"command": " ".join(["python -m lab.bn_recalibration", *sys.argv[1:]]),
                       "runs": results}, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
