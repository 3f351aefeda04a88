"""How the int8 accuracy depends on the activation ranges' width (RANGE_SIGMAS of sdk/engines/int8.py), on training
photos (docs/results/experiments.md, "Is it the range width?"; pre-registered).

    python -m lab.int8_range_sweep BUNDLE RUN --tasks 30 --out docs/results/int8_range_sweep.json

The first TASKS evaluation tasks of seed 0, each personalized in float32 and in int8 with every k of --sigmas,
scored on --per-class training photos per class (the val photos stay the benchmark's). The plan's ranges are
widened or narrowed for the length of one k by wrapping `Int8Plan.ranges`; nothing in the SDK changes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import numpy as np

import sdk
from sdk.engines import int8
from trainer.config import TrainConfig
from trainer.data.cache import load_dataset
from trainer.data.tasks import TaskSampler
from trainer.rundir import RunDir


@contextlib.contextmanager
def range_sigmas(k: float):
    original = int8.Int8Plan.ranges
    int8.Int8Plan.ranges = lambda self, mixed, sigmas=k: original(self, mixed, sigmas)
    try:
        yield
    finally:
        int8.Int8Plan.ranges = original


def score(model, classes: list[int], images: list, truth: np.ndarray) -> float:
    """Top-1 (%) of `model` on `images` whose true class indices are `truth`."""
    predicted = np.asarray(classes)[model.logits(images).argmax(1)]
    return 100.0 * float(np.mean(predicted == truth))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("run", type=Path)
    parser.add_argument("--tasks", type=int, default=30)
    parser.add_argument("--per-class", type=int, default=50)
    parser.add_argument("--sigmas", type=float, nargs="+", default=[2, 3, 4, 6, 8, 12])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    config = TrainConfig.load(RunDir(args.run).config)
    data = load_dataset(config.data, config.input_size, progress=False)
    bundle = sdk.load(args.bundle).warm_up()
    names = [c.name for c in bundle.bundle.classes]
    tasks = TaskSampler(data.hierarchy, k=config.task_k).evaluation_tasks(0)[: args.tasks]
    labels = np.asarray(data.train.labels)
    rng = np.random.default_rng(0)
    top1: dict[str, list[float]] = {"float32": [], **{f"int8 k={k:g}": [] for k in args.sigmas}}
    for task in tasks:
        classes = sorted(int(c) for c in task)
        keep = np.concatenate([rng.choice(np.flatnonzero(labels == c), args.per_class, replace=False)
                               for c in classes])
        images, truth = list(np.asarray(data.train.images[np.sort(keep)])), labels[np.sort(keep)]
        wanted = [names[i] for i in classes]

        top1["float32"].append(score(sdk.personalize(bundle, wanted), classes, images, truth))
        for k in args.sigmas:
            with range_sigmas(k):
                model = sdk.personalize(bundle, wanted, precision="int8")
            top1[f"int8 k={k:g}"].append(score(model, classes, images, truth))
    means = {key: round(float(np.mean(v)), 2) for key, v in top1.items()}
    result = {"command": "python -m lab.int8_range_sweep " + " ".join(sys.argv[1:] if argv is None else argv),
              "bundle": args.bundle.name, "tasks": len(tasks), "per_class": args.per_class,
              "top1_train_photos": means,
              "int8_minus_float32": {k: round(v - means["float32"], 2) for k, v in means.items() if k != "float32"},
              "wall_s": round(time.perf_counter() - start, 1)}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
