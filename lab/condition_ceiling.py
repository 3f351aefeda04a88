"""Field conditions: the per-condition ceiling at the method's own compute (issue 50, part 2 revisited).

The headroom experiment (lab/condition_headroom.py) measured its ceiling (e) against a generic network (b)
of 12 epochs; the `conditions` run's baseline (b) had 21, and there the stage-2 bases were level with it.
This asks the question again from the run's own (b): does fine-tuning it on one condition still beat
fine-tuning it on all of them for the same epochs? Protocol and predictions were committed to
docs/results/experiments.md ("The per-condition ceiling from the run's own baseline, pre-registered")
before this ran. Networks (the run's width, recipe and data; `--finetune-epochs` F at lr 0.01, cosine):
- generic_cs (b): the run's baseline (stage 1 continued on all conditions for stages 2 + 3's epochs);
- generic_more (b+F): (b) continued F epochs on all conditions (each image in a condition drawn uniformly);
- condition_oracle (e): for each condition, (b) fine-tuned F epochs on that condition only.
Scored by lab/condition_report.py's protocol (the same tasks, images and severities; classifier
selection); the headline is (e) - (b+F) on the mean over the non-clean conditions.

    python -m lab.condition_ceiling /root/runs/conditions --work /root/cond-ceiling \\
        --out docs/results/condition_ceiling.json
    python -m lab.condition_ceiling /tmp/cond-tiny --work /tmp/cc --finetune-epochs 0.1 --task-every 1 \\
        --images-per-class 4                                                      # a tiny run
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from trainer.checkpoints import load_state
from trainer.data.condition_cache import MixtureSplit
from trainer.evaluate import Evaluator
from trainer.rundir import RunDir

from .condition_headroom import FINETUNE_LR, Trainer, severities, val_images
from .condition_report import evaluation_tasks, open_run

ROWS = ("generic_cs", "generic_more", "condition_oracle")
MIXTURE_SEED = 2  # the headroom experiment's mixtures used seeds 0 and 1


def train_networks(run_dir: Path, work: Path, finetune_epochs: float) -> dict[str, dict]:
    """{"generic_cs": state, "generic_more": state, "oracle_<condition>": state, ...}, each trained once
    and cached under `work` (a rerun resumes)."""
    config, ctx, _, _ = open_run(run_dir)
    work.mkdir(parents=True, exist_ok=True)
    trainer = Trainer(config, ctx.conditions, work)
    start = work / "generic.pt"
    if not start.exists():
        torch.save(load_state(RunDir(run_dir).model("baseline")), start)
    states = {"generic_cs": trainer.network("generic", None, 0, 0)}
    mixture = MixtureSplit(ctx.conditions, config.conditions, MIXTURE_SEED)
    states["generic_more"] = trainer.network("generic_more", mixture, finetune_epochs, FINETUNE_LR, start="generic")
    for name in config.conditions:
        states[f"oracle_{name}"] = trainer.network(
            f"oracle_{name}", ctx.conditions.train(name), finetune_epochs, FINETUNE_LR, start="generic")
    return states


def score(run_dir: Path, states: dict, task_seeds: list[int], task_every: int, images_per_class: int,
          progress=print) -> dict:
    """{row: {condition: {"s3": acc, "s5": acc} or {"clean": acc}}}, condition_oracle on each condition by
    that condition's network."""
    config, ctx, _, _ = open_run(run_dir)
    tasks = evaluation_tasks(config, ctx, task_seeds, task_every)

    def networks(name: str) -> dict:
        return {"generic_cs": states["generic_cs"], "generic_more": states["generic_more"],
                "condition_oracle": states[f"oracle_{name}"]}

    return score_cells(ctx, ctx.conditions, config.conditions, ROWS, networks, tasks, images_per_class,
                       lambda line: progress(f"[ceiling] {line}"))


def score_cells(ctx, conditions, names, rows: tuple[str, ...], networks, tasks: list[np.ndarray],
                images_per_class: int, progress=print, extra=None) -> dict:
    """Classifier selection of each row's network (`networks(condition)` -> {row: state}) on each condition
    at its report severities: {"cells": {row: {condition: {"s3": acc, ...}}}, "tasks", "images"}.
    `extra(condition, severity, evaluator)` -> {row: acc}: rows scored another way on the same cell (the
    evaluator's `x` then holds the cell's images)."""
    evaluator = Evaluator(ctx.data, ctx.model_config, ctx.preprocessing, images_per_class=images_per_class)
    keep, clean_x = evaluator.rows, evaluator.x
    per: dict[str, dict] = {row: {} for row in rows}
    for name in names:
        states = networks(name)
        for s in severities(name):
            evaluator.x = clean_x if name == "clean" else val_images(conditions, name, s, ctx.preprocessing, keep)
            key = "clean" if s == 0 else f"s{s}"
            for row in rows:
                per[row].setdefault(name, {})[key] = round(evaluator.static(evaluator.logits(states[row]), tasks)[0], 2)
            for row, acc in (extra(name, s, evaluator) if extra else {}).items():
                per.setdefault(row, {}).setdefault(name, {})[key] = acc
            progress(f"{name} {key}: " + ", ".join(f"{r} {per[r][name][key]:.2f}" for r in per))
    evaluator.x = clean_x
    return {"cells": per, "tasks": len(tasks), "images": int(len(keep))}


def condition_means(cells: dict, names: tuple[str, ...], rows: tuple[str, ...]) -> tuple[dict, dict]:
    """(per condition: {condition: {row: mean over severities}}, {row: mean over the non-clean conditions})."""
    per_condition = {c: {row: round(float(np.mean(list(cells[row][c].values()))), 2) for row in rows} for c in names}
    accuracy = {row: round(float(np.mean([per_condition[c][row] for c in names if c != "clean"])), 2) for row in rows}
    return per_condition, accuracy


def summarise(cells: dict, names: tuple[str, ...]) -> dict:
    per_condition, accuracy = condition_means(cells, names, ROWS)
    return {
        "accuracy": accuracy,
        "clean": {row: per_condition["clean"][row] for row in ROWS} if "clean" in names else None,
        "per_condition": per_condition,
        "ceiling_minus_generic_more": round(accuracy["condition_oracle"] - accuracy["generic_more"], 2),
        "ceiling_minus_generic": round(accuracy["condition_oracle"] - accuracy["generic_cs"], 2),
        "ceiling_minus_generic_more_per_condition": {
            c: round(per_condition[c]["condition_oracle"] - per_condition[c]["generic_more"], 2) for c in names},
    }


def table(result: dict, names: tuple[str, ...]) -> str:
    head = "| row | " + " | ".join(names) + " | mean non-clean |"
    lines = [head, "|---" * (len(names) + 2) + "|"]
    for row in ROWS:
        cells = [f"{result['per_condition'][c][row]:.2f}" for c in names]
        lines.append(f"| {row} | " + " | ".join(cells) + f" | {result['accuracy'][row]:.2f} |")
    deltas = [f"{result['ceiling_minus_generic_more_per_condition'][c]:+.2f}" for c in names]
    lines.append("| (e) - (b+F) | " + " | ".join(deltas) + f" | **{result['ceiling_minus_generic_more']:+.2f}** |")
    return "\n".join(lines)


def add_scoring_arguments(parser: argparse.ArgumentParser) -> None:
    """The scoring protocol's options, shared with lab.condition_width."""
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="task seeds")
    parser.add_argument("--task-every", type=int, default=5, help="score every n-th task of each seed")
    parser.add_argument("--images-per-class", type=int, default=10, help="val images of each class scored")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here (and the table beside it)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.condition_ceiling", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, help="a finished `--preset conditions` run")
    parser.add_argument("--work", type=Path, required=True, help="networks and logs (resumable)")
    parser.add_argument("--finetune-epochs", type=float, default=2, help="F: epochs of every continuation")
    add_scoring_arguments(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    began = time.perf_counter()
    states = train_networks(args.run_dir, args.work, args.finetune_epochs)
    scored = score(args.run_dir, states, args.seeds, args.task_every, args.images_per_class)
    names = tuple(open_run(args.run_dir)[0].conditions)
    walls = {p.stem: float(p.read_text()) for p in sorted(args.work.glob("*.wall_s"))}
    result = {
        "command": " ".join(["python -m lab.condition_ceiling", *(argv or sys.argv[1:])]),
        "protocol": {"finetune_epochs": args.finetune_epochs, "finetune_lr": FINETUNE_LR,
                     "task_seeds": args.seeds, "task_every": args.task_every,
                     "images_per_class": args.images_per_class, "tasks": scored["tasks"]},
        **summarise(scored["cells"], names),
        "cells": scored["cells"],
        "train_wall_s": walls,
        "seconds": round(time.perf_counter() - began, 1),
    }
    text = json.dumps(result, indent=1)
    print(table(result, names))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
        args.out.with_suffix(".md").write_text(table(result, names) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
