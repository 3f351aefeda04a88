"""Accuracy of a run's stage-1 network alone (for runs stopped with `--until stage1`): top-1 over all
classes and with classifier selection on the report's 20-way neighbourhood tasks (its task seeds).

    python -m lab.stage1_accuracy /root/taper-runs/b128-e8 /root/taper-runs/b512-e8
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from trainer.config import TrainConfig
from trainer.data.tasks import TaskSampler
from trainer.evaluate import Evaluator
from trainer.run import load_model, make_context
from trainer.rundir import RunDir


def stage1_accuracy(run_dir: Path) -> dict:
    config = TrainConfig.load(RunDir(run_dir).config)
    ctx = make_context(run_dir, config, progress=False)
    evaluator = Evaluator(ctx.data, ctx.model_config, ctx.preprocessing, config.eval_images_per_class)
    logits = evaluator.logits(load_model(ctx.model_config, RunDir(run_dir).model("stage1")).state_dict())
    sampler = TaskSampler(ctx.data.hierarchy, k=config.task_k)
    selection = [evaluator.static(logits, sampler.evaluation_tasks(seed))[0] for seed in config.eval_seeds]
    return {"run": str(run_dir), "top1_all_classes": round(100.0 * float((logits.argmax(1) == evaluator.labels)
                                                                        .float().mean()), 2),
            "classifier_selection": round(float(np.mean(selection)), 2),
            "classifier_selection_per_seed": [round(s, 2) for s in selection]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="+")
    for run_dir in parser.parse_args().runs:
        print(json.dumps(stage1_accuracy(run_dir)), flush=True)


if __name__ == "__main__":
    main()
