"""Issue 75: the fine-tuning defaults a start from `--init` takes (trainer.config.FINETUNE), chosen by
measurement on images the transfer benchmark never scores.

    python -m lab.finetune_defaults --out docs/results/finetune_defaults.json     # ~15 min here

The selection split: the own photos' first SELECT_TRAIN training photos of each class train, the rest of
its 150 training photos are the val images (the benchmark's val images are not read). From the upstream
bundle of scripts/bench_transfer.py (Tiny ImageNet without the 24 own classes), stage 1 only (the network
classifier selection scores), on the same 6-way neighbourhood tasks as the benchmark (eval seeds 0-2), over
the grid GRID: learning rate x epochs of the whole network x epochs of the classifier alone first.
The best cell (accuracy, then fewer epochs) is what FINETUNE adopts.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import time
from pathlib import Path

GRID = {"stage1_lr": (0.1, 0.03, 0.01), "stage1_epochs": (4, 8, 16), "stage1_head_epochs": (0, 1)}
SELECT_TRAIN = 120


def selection_folder(photos: Path, out: Path) -> Path:
    """An ImageFolder of the own photos' training images only: the first SELECT_TRAIN of each class (sorted
    by name) under train/, the rest under val/, and the same vocabulary (built once)."""
    if (out / "vocabulary.toml").is_file():
        return out
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    for folder in sorted(p for p in (photos / "train").iterdir() if p.is_dir()):
        files = sorted(folder.iterdir())
        for split, chosen in (("train", files[:SELECT_TRAIN]), ("val", files[SELECT_TRAIN:])):
            (tmp / split / folder.name).mkdir(parents=True)
            for f in chosen:
                shutil.copy(f, tmp / split / folder.name / f.name)
    shutil.copy(photos / "vocabulary.toml", tmp / "vocabulary.toml")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.finetune_defaults", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=None, help="the transfer work folder (default: the cache's)")
    parser.add_argument("--out", type=Path, default=None, help="write the grid's result here (JSON)")
    args = parser.parse_args(argv)

    from scripts.bench_transfer import Scorer, own_photos, own_run, upstream_bundle, work_folder
    from scripts.cpu import describe

    work = work_folder(args.work)
    photos = own_photos(work)
    select = selection_folder(photos, work / "select-photos")
    bundle = upstream_bundle(work)
    cells, scorer = [], None
    for lr, epochs, head in itertools.product(*GRID.values()):
        name = f"select-lr{lr}-e{epochs}-h{head}"
        run_dir, seconds = own_run(work / "select", name, select, {"stage1_init": str(bundle), "stage1_lr": lr,
                                                                   "stage1_epochs": epochs,
                                                                   "stage1_head_epochs": head}, until="stage1")
        scorer = scorer or Scorer(run_dir)
        score = scorer.network(run_dir)
        cells.append({"stage1_lr": lr, "stage1_epochs": epochs, "stage1_head_epochs": head,
                      "accuracy": score["accuracy"], "train_s": round(seconds, 1)})
        print(json.dumps(cells[-1]), flush=True)
    best = max(cells, key=lambda c: (c["accuracy"], -(c["stage1_epochs"] + c["stage1_head_epochs"])))
    result = {"grid": GRID, "cells": cells, "best": best, "select_train_per_class": SELECT_TRAIN,
              "val_images": int(len(scorer.labels)), "tasks": len(scorer.tasks), "cpu": describe(),
              "date": time.strftime("%Y-%m-%d"), "command": "python -m lab.finetune_defaults --out " + str(args.out)}
    print(json.dumps(best))
    if args.out:
        from scripts.results import write_result

        write_result(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
