"""Field conditions: the per-condition ceiling at another width, against a same-compute generic network
(issue 50, part 2 at width 0.125).

At width 0.25 a network fine-tuned on one condition beat a generic network of two more epochs by +3.93
(docs/results/condition_ceiling.md), but only +0.82 beat a generic network given the nine fine-tunes'
compute (docs/results/conditions_v2.md, (b39)). The issue asks for the ceiling at width 0.125 when its
gain is small: a narrower network has less spare capacity to serve nine conditions at once. Protocol and
predictions were committed to docs/results/experiments.md ("The ceiling at width 0.125, pre-registered")
before this ran. Networks, all at `--width`, the `conditions` preset's recipe (stem, batch, augmentation,
optimiser); lr 0.1 then 0.01, cosine, as that run's stage 1 and baseline:
- generic_base: `--base-epochs` (10) on all conditions at lr 0.1 (the run's stage 1);
- generic_cs (b): generic_base + `--generic-epochs` (11) on all conditions at lr 0.01 (the run's (b21));
- generic_more (b+F): (b) + F (2) more on all conditions;
- condition_oracle (e): for each condition, (b) fine-tuned F epochs on that condition only;
- generic_same_compute (b+9F): (b) + 9F (18) on all conditions: the compute of the nine fine-tunes
  (round 2's (b39)).
Each continuation draws a fresh mixture (its own seed). Scored as lab/condition_ceiling.py scores (120
tasks: seeds 0-2, every fifth; 10 val images a class; severities 3 and 5; classifier selection); the
headline is (e) - (b+9F) on the mean over the non-clean conditions.

    python -m lab.condition_width --width 0.125 --work /root/cond-w0125 \\
        --out docs/results/condition_width_0125.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from trainer.config import CONDITIONS_RECIPE, TrainConfig
from trainer.data.condition_cache import ConditionData, MixtureSplit
from trainer.run import open_data

from .condition_ceiling import add_scoring_arguments, condition_means, score_cells
from .condition_headroom import FINETUNE_LR, Trainer
from .condition_report import evaluation_tasks

ROWS = ("generic_cs", "generic_more", "generic_same_compute", "condition_oracle")
MIXTURE_SEEDS = {"generic_base": 10, "generic": 11, "generic_more": 12, "generic_same_compute": 13}
BASE_LR = 0.1


def mixture_seeds(train_seed: int) -> dict[str, int]:
    """Each network's mixture draw; another training seed redraws only (b+9F)'s ((b) and (b+F) are shared)."""
    return {**MIXTURE_SEEDS, "generic_same_compute": MIXTURE_SEEDS["generic_same_compute"] + 100 * train_seed}


def train_networks(trainer: Trainer, names: tuple[str, ...], base_epochs: float, generic_epochs: float,
                   finetune_epochs: float, train_seed: int = 0) -> dict[str, dict]:
    """{"generic_cs": state, ..., "oracle_<condition>": state}, each trained once and cached (resumable).
    `train_seed` > 0: the nine (e) and (b+9F) are trained again from the same (b) with that training seed
    (files `<name>_s<seed>.pt`; their batch order, augmentation and mixture draws differ)."""
    mixture = {name: MixtureSplit(trainer.conditions, names, seed)
               for name, seed in mixture_seeds(train_seed).items()}
    trainer.network("generic_base", mixture["generic_base"], base_epochs, BASE_LR)
    states = {"generic_cs": trainer.network("generic", mixture["generic"], generic_epochs, FINETUNE_LR,
                                            start="generic_base")}
    states["generic_more"] = trainer.network("generic_more", mixture["generic_more"], finetune_epochs,
                                             FINETUNE_LR, start="generic")
    suffix = f"_s{train_seed}" if train_seed else ""
    if train_seed:
        trainer = Trainer(replace(trainer.config, seed=train_seed), trainer.conditions, trainer.work)
    for name in names:
        states[f"oracle_{name}"] = trainer.network(f"oracle_{name}{suffix}", trainer.conditions.train(name),
                                                   finetune_epochs, FINETUNE_LR, start="generic")
    states["generic_same_compute"] = trainer.network(
        f"generic_same_compute{suffix}", mixture["generic_same_compute"], finetune_epochs * len(names),
        FINETUNE_LR, start="generic")
    return states


def score(trainer: Trainer, names: tuple[str, ...], states: dict, task_seeds: list[int], task_every: int,
          images_per_class: int, progress=print) -> dict:
    """{row: {condition: {"s3": acc, "s5": acc} or {"clean": acc}}}; the oracle row on each condition by
    that condition's network."""
    tasks = evaluation_tasks(trainer.config, trainer.ctx, task_seeds, task_every)

    def networks(name: str) -> dict:
        return {**{row: states[row] for row in ROWS if row != "condition_oracle"},
                "condition_oracle": states[f"oracle_{name}"]}

    return score_cells(trainer.ctx, trainer.conditions, names, ROWS, networks, tasks, images_per_class,
                       lambda line: progress(f"[width] {line}"))


def summarise(cells: dict, names: tuple[str, ...]) -> dict:
    per_condition, accuracy = condition_means(cells, names, ROWS)

    def minus(row: str) -> dict:
        return {c: round(per_condition[c]["condition_oracle"] - per_condition[c][row], 2) for c in names}

    return {
        "accuracy": accuracy,
        "per_condition": per_condition,
        "ceiling_minus_same_compute": round(accuracy["condition_oracle"] - accuracy["generic_same_compute"], 2),
        "ceiling_minus_generic_more": round(accuracy["condition_oracle"] - accuracy["generic_more"], 2),
        "ceiling_minus_same_compute_per_condition": minus("generic_same_compute"),
        "ceiling_minus_generic_more_per_condition": minus("generic_more"),
    }


def table(result: dict, names: tuple[str, ...]) -> str:
    lines = ["| row | " + " | ".join(names) + " | mean non-clean |", "|---" * (len(names) + 2) + "|"]
    for row in ROWS:
        cells = [f"{result['per_condition'][c][row]:.2f}" for c in names]
        lines.append(f"| {row} | " + " | ".join(cells) + f" | {result['accuracy'][row]:.2f} |")
    for label, key in (("(e) - (b+F)", "generic_more"), ("(e) - (b+9F), the headline", "same_compute")):
        deltas = [f"{result[f'ceiling_minus_{key}_per_condition'][c]:+.2f}" for c in names]
        lines.append(f"| {label} | " + " | ".join(deltas) + f" | **{result[f'ceiling_minus_{key}']:+.2f}** |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.condition_width", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--width", type=float, default=0.125, help="ResNet-18 width multiplier")
    parser.add_argument("--work", type=Path, required=True, help="networks and logs (resumable)")
    parser.add_argument("--base-epochs", type=float, default=10, help="generic_base's epochs at lr 0.1")
    parser.add_argument("--generic-epochs", type=float, default=11, help="(b)'s epochs after it, at lr 0.01")
    parser.add_argument("--finetune-epochs", type=float, default=2, help="F: epochs of each fine-tune")
    parser.add_argument("--train-seed", type=int, default=0,
                        help="> 0: train the (e) networks and (b+9F) again from the same (b) with this seed")
    add_scoring_arguments(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    began = time.perf_counter()
    config = TrainConfig(**{**CONDITIONS_RECIPE, "width": args.width})
    names = tuple(config.conditions)
    args.work.mkdir(parents=True, exist_ok=True)
    trainer = Trainer(config, ConditionData.open(open_data(config)), args.work)
    states = train_networks(trainer, names, args.base_epochs, args.generic_epochs, args.finetune_epochs,
                            args.train_seed)
    scored = score(trainer, names, states, args.seeds, args.task_every, args.images_per_class)
    result = {
        "command": " ".join(["python -m lab.condition_width", *(argv or sys.argv[1:])]),
        "protocol": {"width": args.width, "base_epochs": args.base_epochs, "base_lr": BASE_LR,
                     "generic_epochs": args.generic_epochs, "finetune_epochs": args.finetune_epochs,
                     "finetune_lr": FINETUNE_LR, "mixture_seeds": mixture_seeds(args.train_seed),
                     "train_seed": args.train_seed, "task_seeds": args.seeds, "task_every": args.task_every,
                     "images_per_class": args.images_per_class, "tasks": scored["tasks"]},
        **summarise(scored["cells"], names),
        "cells": scored["cells"],
        "train_wall_s": {p.stem: float(p.read_text()) for p in sorted(args.work.glob("*.wall_s"))},
        "seconds": round(time.perf_counter() - began, 1),
    }
    print(table(result, names))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        args.out.with_suffix(".md").write_text(table(result, names) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
