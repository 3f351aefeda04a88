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
import torch

import sdk
from trainer.checkpoints import load_state
from trainer.rundir import RunDir

from .condition_ceiling import condition_means, score_cells
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


def sdk_accuracy(evaluator, tasks: list[np.ndarray], images: np.ndarray, class_index: dict[str, int],
                 model_for) -> float:
    """Accuracy of a personalized model per task (`model_for(task)`), run by the SDK on the task's val
    images (uint8 `images`, the evaluator's rows): the evaluator's plain accuracy, the logits of every class
    the model does not have at -inf (so such a class is never predicted, and its images are always wrong)."""
    def logits_for(i, task, idx):
        model = model_for(task)
        logits = torch.full((len(idx), evaluator.num_classes), float("-inf"))
        logits[:, [class_index[c] for c in model.classes]] = torch.from_numpy(model.logits(images[idx.numpy()]))
        return logits

    return round(evaluator.accumulate(tasks, logits_for)[1], 2)


def stream_for(val, keep: np.ndarray, task: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """The adapt row's unlabelled batches: the task's val images outside the scored ones (`keep`), drawn in
    a random order."""
    pool = np.setdiff1d(np.flatnonzero(np.isin(val.labels, task)), keep)
    drawn = rng.choice(pool, STREAM_BATCHES * STREAM_BATCH, replace=False)
    return [np.asarray(val.images[np.sort(batch)]) for batch in np.split(drawn, STREAM_BATCHES)]


def score(run_dir: Path, bundle_path: Path, shots: int, task_every: int, progress=print) -> dict:
    config, ctx, taper, _ = open_run(run_dir)
    names = tuple(config.conditions)
    tasks = evaluation_tasks(config, ctx, [0, 1, 2], 5)[::task_every]
    generic = load_state(RunDir(run_dir).model("baseline"))
    bundle = sdk.load(bundle_path, cache=False)
    class_names = bundle.classes
    if len(class_names) != ctx.data.num_classes:
        raise SystemExit(f"{bundle_path}: {len(class_names)} classes, the run has {ctx.data.num_classes}")
    class_index = {c: i for i, c in enumerate(class_names)}
    chosen: dict[str, dict] = {}

    def networks(name: str) -> dict:
        return {"generic_cs": generic, "condition_basis": taper.bank.basis_state_dict(names.index(name))}

    def sdk_rows(name: str, s: int, evaluator) -> dict:
        q, train, val = names.index(name), ctx.conditions.train(name), ctx.conditions.val(name, s)
        images = np.asarray(val.images[evaluator.rows])   # uint8, as a user's photos reach the SDK
        picks = Counter()
        examples_rng, stream_rng = np.random.default_rng([50, q, s]), np.random.default_rng([51, q, s])

        def enrolled(task):
            model = sdk.personalize(bundle, examples=examples_for(train, task, class_names, shots, examples_rng))
            pick = chosen_candidate(model.resolution)
            picks["own basis" if pick == f"basis {q}" else "other basis" if pick.startswith("basis") else pick] += 1
            return model

        rows = {"fewshot": sdk_accuracy(evaluator, tasks, images, class_index, enrolled),
                "adapt": sdk_accuracy(evaluator, tasks, images, class_index, lambda task: sdk.personalize(
                    bundle, stream=stream_for(val, evaluator.rows, task, stream_rng)))}
        chosen.setdefault(name, {})["clean" if s == 0 else f"s{s}"] = dict(picks)
        return rows

    scored = score_cells(ctx, ctx.conditions, names, ROWS[:2], networks, tasks, 10,
                         lambda line: progress(f"[fewshot] {line}"), extra=sdk_rows)
    return {"cells": scored["cells"], "chosen": chosen, "tasks": len(tasks), "names": list(names)}


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
