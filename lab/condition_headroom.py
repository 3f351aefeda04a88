"""Field conditions, headroom first (issue 50, part 2): is a network specialised to one condition better
than a generic one trained on all of them, on 20-way tasks, with the same compute?

The protocol, the condition set and the predictions were committed to docs/results/experiments.md
("Field conditions: the condition set, pre-registered") before this ran. Networks (ResNet-18 width 0.25,
the bench's stem, augmentation, batch and optimiser; `--epochs` E and `--finetune-epochs` F):
- clean_generic (a): E epochs on clean images at lr 0.1 (cosine), then F more at lr 0.01: what users have.
- generic (b): E epochs on all nine conditions (each image of a batch in a condition drawn uniformly),
  then F more on all nine at lr 0.01. The main baseline.
- condition_oracle (e): for each condition, the same E-epoch network fine-tuned F epochs at lr 0.01 on
  that condition only (batch norm in training mode): the same compute as (b), a network per condition.
  One fixed schedule for (b) and (e), chosen before the run, so nothing is selected on val.
- condition_bn (d): (b) with every batch norm's statistics re-estimated on the condition's training images
  (10 per class, their seeded severities, no augmentation), picked by the true condition.
- bn_adapt_{iid_16, iid_64, sorted_64} (c): (b) with batch-norm statistics from k unlabelled val images of
  the task (drawn at random, or the first k in class order: a class-sorted stream), per task, on every
  fifth task of seed 0 (`--adapt-every`), scored on all the task's val images.
Score: classifier selection over each task's 20 classes, tasks anchored at every class (seeds 0-2, the
bench's protocol), per condition at severities 3 and 5; the headline is the mean over the eight non-clean
conditions of the mean over the two severities.

    python -m lab.condition_headroom --work /root/cond-headroom --out docs/results/condition_headroom.json
    python -m lab.condition_headroom --work /tmp/ch --data synthetic --epochs 1 --finetune-epochs 1  # smoke
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from sdk.media.preprocessing import Preprocessing
from trainer.config import RECIPE, TrainConfig
from trainer.data.condition_cache import ConditionData, MixtureSplit
from trainer.data.conditions import CONDITION_NAMES, REPORT_SEVERITIES
from trainer.data.tasks import TaskSampler
from trainer.data.transforms import to_normalized_tensor
from trainer.evaluate import Evaluator
from trainer.loop import JsonLog
from trainer.models import ResNet18
from trainer.run import network_config, open_data
from trainer.stages import StageContext, train_plain

from .bn_recalibration import recalibrated

FINETUNE_LR = 0.01
BN_IMAGES_PER_CLASS = 10  # (d): 2,000 training images of the condition at 200 classes
ROWS = (
    "clean_generic_cs",
    "generic_cs",
    "bn_adapt_iid_16",
    "bn_adapt_iid_64",
    "bn_adapt_sorted_64",
    "condition_bn",
    "condition_oracle",
)


def severities(name: str) -> tuple[int, ...]:
    return (0,) if name == "clean" else REPORT_SEVERITIES  # 0: the clean val images


class Trainer:
    """Trains (and caches under `work`) the protocol's networks, one state dict per network."""

    def __init__(self, config: TrainConfig, conditions: ConditionData, work: Path):
        self.config, self.conditions, self.work = config, conditions, work
        data = conditions.data
        self.ctx = StageContext(
            config,
            data,
            network_config(config, data.num_classes),
            Preprocessing(config.input_size),
            JsonLog(work / "log.jsonl"),
        )

    def network(self, name: str, train_split, epochs: float, lr: float, start: str | None = None) -> dict:
        path = self.work / f"{name}.pt"
        if path.exists():
            return torch.load(path, weights_only=True)
        began = time.perf_counter()
        torch.manual_seed(self.config.seed)
        model = ResNet18(self.ctx.model_config)
        if start is not None:
            model.load_state_dict(self.network(start, None, 0, 0))
        ctx = replace(self.ctx, data=replace(self.ctx.data, train=train_split))
        model = train_plain(ctx, self.work / name, name, model, epochs, lr)
        state = {k: v.clone() for k, v in model.state_dict().items()}
        torch.save(state, path)
        (self.work / f"{name}.wall_s").write_text(str(round(time.perf_counter() - began, 1)))
        return state

    def mixture(self, seed: int) -> MixtureSplit:
        return MixtureSplit(self.conditions, CONDITION_NAMES, seed)


def evaluate_rows(
    trainer: Trainer, epochs: float, finetune_epochs: float, seeds: list[int], adapt_every: int, progress=print
) -> dict:
    conditions, cfg = trainer.conditions, trainer.config
    data = conditions.data
    lr = cfg.lr
    trainer.network("clean_base", conditions.train("clean"), epochs, lr)
    states = {
        "clean_generic_cs": trainer.network(
            "clean_generic", conditions.train("clean"), finetune_epochs, FINETUNE_LR, start="clean_base"
        )
    }
    trainer.network("generic_base", trainer.mixture(0), epochs, lr)
    states["generic_cs"] = trainer.network(
        "generic", trainer.mixture(1), finetune_epochs, FINETUNE_LR, start="generic_base"
    )
    model = ResNet18(trainer.ctx.model_config)
    evaluator = Evaluator(data, trainer.ctx.model_config, trainer.ctx.preprocessing)
    clean_x = evaluator.x
    sampler = TaskSampler(data.hierarchy, k=cfg.task_k)
    task_sets = [sampler.evaluation_tasks(seed) for seed in seeds]
    adapt_tasks = task_sets[0][::adapt_every]
    per: dict[str, dict[str, dict[str, float]]] = {row: {} for row in ROWS}

    def cs(logits) -> float:
        return float(np.mean([evaluator.static(logits, tasks)[0] for tasks in task_sets]))

    for name in CONDITION_NAMES:
        oracle = trainer.network(
            f"oracle_{name}", conditions.train(name), finetune_epochs, FINETUNE_LR, start="generic_base"
        )
        condition_bn = condition_bn_state(model, states["generic_cs"], conditions, name, trainer.ctx.preprocessing)
        for s in severities(name):
            evaluator.x = clean_x if name == "clean" else val_images(conditions, name, s, trainer.ctx.preprocessing)
            key = "clean" if s == 0 else f"s{s}"
            for row, state in (*states.items(), ("condition_oracle", oracle), ("condition_bn", condition_bn)):
                per[row].setdefault(name, {})[key] = round(cs(evaluator.logits(state)), 2)
            streams = stream_rows(evaluator, adapt_tasks, s)
            for row, score in bn_adapt(evaluator, model, states["generic_cs"], adapt_tasks, streams).items():
                per[row].setdefault(name, {})[key] = round(score, 2)
            progress(f"[headroom] {name} {key}: " + ", ".join(f"{row} {per[row][name][key]:.2f}" for row in ROWS))
    evaluator.x = clean_x
    return per


def condition_bn_state(model: ResNet18, state: dict, conditions: ConditionData, name: str, preprocessing) -> dict:
    """(d): `state` with every batch norm's statistics re-estimated on condition `name`'s training images
    (the first BN_IMAGES_PER_CLASS of each class, at their seeded severities, no augmentation)."""
    labels = conditions.data.train.labels
    rows = np.concatenate(
        [np.flatnonzero(labels == c)[:BN_IMAGES_PER_CLASS] for c in range(conditions.data.num_classes)]
    )
    images = to_normalized_tensor(conditions.train(name).take(rows)[0], preprocessing)
    return recalibrated(model, state, images.to(next(model.parameters()).device))


def val_images(conditions: ConditionData, name: str, severity: int, preprocessing, rows=None) -> torch.Tensor:
    """Condition `name`'s val images at `severity` (all, or `rows`), normalised [N, 3, H, W]."""
    images = conditions.val(name, severity).images
    images = images if rows is None else images[rows]
    return to_normalized_tensor(torch.from_numpy(np.ascontiguousarray(images)), preprocessing)


STREAMS = {"iid_16": 16, "iid_64": 64, "sorted_64": -64}  # k images at random, or the first |k| in class order


def stream_rows(evaluator: Evaluator, tasks: list[np.ndarray], seed: int) -> dict[str, list[np.ndarray]]:
    """{stream: the evaluator rows each task's stream of unlabelled images shows}: k of the task's val
    images drawn at random (seeded by `seed`), or the first 64 in class order (a class-sorted stream: a
    few classes). (c) and lab/condition_stream.py read the same draws."""
    rng = np.random.default_rng([50, seed])
    labels = evaluator.labels.numpy()
    out = {}
    for name, k in STREAMS.items():
        out[name] = []
        for task in tasks:
            index = evaluator.task_index(task).numpy()
            if k < 0:
                out[name].append(index[np.argsort(labels[index], kind="stable")][:-k])
            else:
                out[name].append(rng.choice(index, size=min(k, len(index)), replace=False))
    return out


def bn_adapt(evaluator: Evaluator, model: ResNet18, state: dict, tasks: list[np.ndarray],
             streams: dict[str, list[np.ndarray]]) -> dict:
    """(c): per task, batch-norm statistics from the task's stream of unlabelled images (`streams`, as
    `stream_rows` draws them for these tasks)."""
    out = {}
    for name, rows in streams.items():
        def state_for(i, task, rows=rows):
            return recalibrated(model, state, evaluator.x[torch.from_numpy(rows[i])])

        out[f"bn_adapt_{name}"] = evaluator.per_task(state_for, tasks)[0]
    return out


def summarise(per: dict) -> dict:
    """Per row: the mean over non-clean conditions of the mean over severities, and clean."""
    accuracy, clean = {}, {}
    for row, by_condition in per.items():
        means = {c: float(np.mean(list(v.values()))) for c, v in by_condition.items()}
        for c, v in by_condition.items():
            v["mean"] = round(means[c], 2)
        accuracy[row] = round(float(np.mean([m for c, m in means.items() if c != "clean"])), 2)
        clean[row] = round(means.get("clean", float("nan")), 2)
    headroom = {
        c: round(per["condition_oracle"][c]["mean"] - per["generic_cs"][c]["mean"], 2) for c in per["generic_cs"]
    }
    return {
        "accuracy": accuracy,
        "clean": clean,
        "headroom_per_condition": headroom,
        "headroom_mean_non_clean": round(accuracy["condition_oracle"] - accuracy["generic_cs"], 2),
    }


def table(result: dict) -> str:
    per = result["per_condition"]
    lines = [
        "| row | " + " | ".join(CONDITION_NAMES) + " | mean non-clean |",
        "|---|" + "---|" * (len(CONDITION_NAMES) + 1),
    ]
    for row in ROWS:
        cells = [f"{per[row][c]['mean']:.2f}" for c in CONDITION_NAMES]
        lines.append(f"| {row} | " + " | ".join(cells) + f" | {result['accuracy'][row]:.2f} |")
    cells = [f"{result['headroom_per_condition'][c]:+.2f}" for c in CONDITION_NAMES]
    lines.append("| (e) - (b) | " + " | ".join(cells) + f" | {result['headroom_mean_non_clean']:+.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.condition_headroom",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--work", type=Path, required=True, help="networks and logs (resumable)")
    parser.add_argument("--data", default=TrainConfig.data, help="the data set (default: Tiny ImageNet)")
    parser.add_argument("--epochs", type=float, default=8, help="E: epochs of (a) and (b)'s first part")
    parser.add_argument("--finetune-epochs", type=float, default=2, help="F: epochs of every continuation")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="task seeds")
    parser.add_argument("--adapt-every", type=int, default=5, help="(c) on every n-th task of seed 0")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here (and the table beside it)")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    config = TrainConfig(**RECIPE, data=args.data, log_every=100)
    if args.data == "synthetic":
        config = replace(
            config,
            stem="small",
            input_size=32,
            batch_size=32,
            task_k=5,
            synthetic={"image_size": 32, "train_per_class": 16, "val_per_class": 4},
        )
    args.work.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    conditions = ConditionData.open(open_data(config))
    trainer = Trainer(config, conditions, args.work)
    per = evaluate_rows(trainer, args.epochs, args.finetune_epochs, args.seeds, args.adapt_every)
    walls = {p.stem: float(p.read_text()) for p in sorted(args.work.glob("*.wall_s"))}
    result = {
        "command": " ".join(["python -m lab.condition_headroom", *(argv or sys.argv[1:])]),
        "protocol": {
            "width": config.width,
            "epochs": args.epochs,
            "finetune_epochs": args.finetune_epochs,
            "finetune_lr": FINETUNE_LR,
            "task_k": config.task_k,
            "task_seeds": args.seeds,
            "severities": list(REPORT_SEVERITIES),
            "adapt_tasks_every": args.adapt_every,
            "bn_images_per_class": BN_IMAGES_PER_CLASS,
        },
        **summarise(per),
        "per_condition": per,
        "train_wall_s": walls,
        "condition_build_s": conditions.build_seconds(),
        "seconds": round(time.perf_counter() - began, 1),
    }
    text = json.dumps(result, indent=1)
    print(text)
    print(table(result))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
        args.out.with_suffix(".md").write_text(table(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
