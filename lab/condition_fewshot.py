"""Few-shot enrollment on condition images (issue 50, part 3's `examples=` row; a lab measure).

    python -m lab.condition_fewshot --run /root/runs/conditions-v2 --bundle /tmp/pp/cond-v2.taper \
        --out docs/results/condition_fewshot

The protocol and prediction are in docs/results/experiments.md ("Few-shot enrollment on condition
images"), written before this ran. Per task and condition: `sdk.personalize(bundle, examples=...)` with
`--shots` training images per class in that condition, scored on the task's val images in the condition
through onnxruntime; `personalize(bundle, stream=...)` (adapt) from 192 other val images of the task in
the condition, scored on the same images; beside them, on the same tasks and images, the run's same-compute
generic network with classifier selection (generic_cs) and the true condition's basis alone
(condition_basis), in torch.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

import sdk
from trainer.checkpoints import load_state
from trainer.evaluate import Evaluator
from trainer.rundir import RunDir

from .condition_ceiling import condition_means
from .condition_headroom import severities, val_images
from .condition_report import evaluation_tasks, open_run

ROWS = ("generic_cs", "condition_basis", "fewshot", "adapt")
STREAM_BATCHES, STREAM_BATCH = 6, 32   # the adapt row: 192 unlabelled images of the task, in the condition


def examples_for(train, task: np.ndarray, names: list[str], shots: int, rng: np.random.Generator) -> dict:
    """{class name: `shots` of its training images in the condition}, drawn without replacement."""
    return {names[c]: list(np.asarray(train.images[np.sort(rng.choice(np.flatnonzero(train.labels == c), shots,
                                                                       replace=False))]))
            for c in task}


def chosen_candidate(resolution: list[str]) -> str:
    """The candidate few-shot selected ("basis 3", "uniform", "mixer: class names"), from its resolution."""
    found = [m.group(1) for line in resolution if (m := re.fullmatch(r"selected '(.+)'", line))]
    return found[-1] if found else "?"


def accuracy(model, images: np.ndarray, labels: np.ndarray, class_names: list[str]) -> tuple[int, int]:
    """(right, total) of a personalized model on `images`: its argmax class against the true names; a class
    the model does not have is always wrong."""
    predicted = np.asarray(model.classes)[model.predict_proba(images).argmax(1)]
    return int((predicted == np.asarray(class_names)[labels]).sum()), len(labels)


def adapt_accuracy(bundle, val, keep: np.ndarray, tasks: list[np.ndarray], images: np.ndarray, evaluator,
                   class_names: list[str], seed: list[int]) -> float:
    """Per task: the task's val images outside the scored ones stream in as unlabelled batches
    (`personalize(stream=...)`); the adapted model is scored on the task's scored images."""
    rng = np.random.default_rng(seed)
    scored = np.zeros(len(val.labels), bool)
    scored[keep] = True
    right = total = 0
    for task in tasks:
        pool = np.flatnonzero(np.isin(val.labels, task) & ~scored)
        drawn = rng.choice(pool, STREAM_BATCHES * STREAM_BATCH, replace=False)   # in a random order
        stream = [np.asarray(val.images[np.sort(batch)]) for batch in np.split(drawn, STREAM_BATCHES)]
        model = sdk.personalize(bundle, stream=stream)
        idx = evaluator.task_index(task).numpy()
        r, t = accuracy(model, images[idx], evaluator.labels.numpy()[idx], class_names)
        right, total = right + r, total + t
    return round(100.0 * right / total, 2)


def score(run_dir: Path, bundle_path: Path, shots: int, task_every: int, progress=print) -> dict:
    config, ctx, taper, _ = open_run(run_dir)
    names_in_run = list(config.conditions)
    conditions = ctx.conditions
    evaluator = Evaluator(ctx.data, ctx.model_config, ctx.preprocessing, images_per_class=10)
    keep, clean_x = evaluator.rows, evaluator.x
    tasks = evaluation_tasks(config, ctx, [0, 1, 2], 5)[::task_every]
    generic = load_state(RunDir(run_dir).model("baseline"))
    bundle = sdk.load(bundle_path, cache=False)
    class_names = bundle.classes
    if len(class_names) != ctx.data.num_classes:
        raise SystemExit(f"{bundle_path}: {len(class_names)} classes, the run has {ctx.data.num_classes}")
    cells: dict[str, dict] = {row: {} for row in ROWS}
    chosen: dict[str, dict] = {}
    for q, name in enumerate(names_in_run):
        train = conditions.train(name)
        for s in severities(name):
            key = "clean" if s == 0 else f"s{s}"
            evaluator.x = clean_x if name == "clean" else val_images(conditions, name, s, ctx.preprocessing, keep)
            images = np.asarray(conditions.val(name, s).images[keep])   # uint8, as a user's photos reach the SDK
            for row, state in (("generic_cs", generic), ("condition_basis", taper.bank.basis_state_dict(q))):
                cells[row].setdefault(name, {})[key] = round(evaluator.static(evaluator.logits(state), tasks)[0], 2)
            rng = np.random.default_rng([50, q, s])
            right = total = 0
            picks = Counter()
            for task in tasks:
                model = sdk.personalize(bundle, examples=examples_for(train, task, class_names, shots, rng))
                idx = evaluator.task_index(task).numpy()
                r, t = accuracy(model, images[idx], evaluator.labels.numpy()[idx], class_names)
                right, total = right + r, total + t
                pick = chosen_candidate(model.resolution)
                picks["own basis" if pick == f"basis {q}" else "other basis" if pick.startswith("basis") else pick] += 1
            cells["fewshot"].setdefault(name, {})[key] = round(100.0 * right / total, 2)
            cells["adapt"].setdefault(name, {})[key] = adapt_accuracy(
                bundle, conditions.val(name, s), keep, tasks, images, evaluator, class_names, [51, q, s])
            chosen.setdefault(name, {})[key] = dict(picks)
            progress(f"[fewshot] {name} {key}: " + ", ".join(f"{row} {cells[row][name][key]:.2f}" for row in ROWS)
                     + f"; chosen {dict(picks)}")
    evaluator.x = clean_x
    return {"cells": cells, "chosen": chosen, "tasks": len(tasks), "names": names_in_run}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--shots", type=int, default=5)
    parser.add_argument("--task-every", type=int, default=4, help="of the report's 120 tasks")
    parser.add_argument("--out", type=Path, default=Path("docs/results/condition_fewshot"))
    args = parser.parse_args(argv)
    began = time.perf_counter()
    scored = score(args.run, args.bundle, args.shots, args.task_every)
    names = scored["names"]
    per_condition, accuracy = condition_means(scored["cells"], tuple(names), ROWS)
    result = {"command": "python -m lab.condition_fewshot " + " ".join(argv if argv is not None else sys.argv[1:]),
              "protocol": {"run": str(args.run), "bundle": str(args.bundle), "shots": args.shots,
                           "tasks": scored["tasks"], "task_seeds": [0, 1, 2], "task_every": [5, args.task_every],
                           "images_per_class": 10},
              "mean_non_clean": accuracy, "per_condition": per_condition,
              "fewshot_minus_generic": round(accuracy["fewshot"] - accuracy["generic_cs"], 2),
              "adapt_minus_generic": round(accuracy["adapt"] - accuracy["generic_cs"], 2),
              "chosen": scored["chosen"], "cells": scored["cells"], "seconds": round(time.perf_counter() - began)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(markdown(result, names))
    print(markdown(result, names))
    return 0


def markdown(r: dict, names: list[str]) -> str:
    lines = ["# Few-shot enrollment on condition images (issue 50, part 3, lab)", "",
             f"`{r['command']}` ({r['protocol']['tasks']} tasks, {r['protocol']['shots']} examples a class, 10 val "
             "images a class, severities 3 and 5; protocol and prediction: docs/results/experiments.md, \"Few-shot "
             f"enrollment on condition images\"; {r['seconds']} s).", "",
             "| row | " + " | ".join(names) + " | mean non-clean |", "|---|" + "---|" * (len(names) + 1)]
    for row in ROWS:
        lines.append(f"| {row} | " + " | ".join(f"{r['per_condition'][n][row]:.2f}" for n in names)
                     + f" | {r['mean_non_clean'][row]:.2f} |")
    lines += ["", f"fewshot - generic_cs, mean non-clean: {r['fewshot_minus_generic']:+.2f}; adapt - generic_cs: "
              f"{r['adapt_minus_generic']:+.2f}.", "",
              "What few-shot chose (tasks, severity 3 and 5 together):", ""]
    for n in names:
        total = Counter()
        for picks in r["chosen"][n].values():
            total.update(picks)
        lines.append(f"- {n}: {dict(total)}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
