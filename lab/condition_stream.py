"""The condition from unlabelled images: a batch-norm statistics proxy over the bases (issue 50, part 4; lab).

    python -m lab.condition_stream --run /root/runs/conditions-v2 --out docs/results/condition_stream
    python -m lab.condition_stream --run /root/runs/conditions-v2 --networks /root/cond-w0125 --width 0.125 \
        --out docs/results/condition_stream_w0125          # lab/condition_width.py's networks, same protocol

The protocol and predictions are in docs/results/experiments.md ("The condition from unlabelled images"),
written before this ran. On a run whose bases are one per condition, per task and cell, a stream of the
task's unlabelled val images ((c)'s own draws, `stream_rows`) picks one basis:
- stream_bn_*: the basis whose batch-norm running statistics the stream's statistics match best (the
  Gaussian KL divergence of the stream's per-channel mean and variance of each batch norm's input from the
  basis's running ones, averaged over channels, then over batch norms): it needs no labels and no classes;
- stream_entropy_*: the basis with the lowest mean entropy of its softmax over the task's classes.
Each is scored with classifier selection on all the task's images, beside generic_cs (b), bn_adapt_* (c)
and condition_basis (oracle routing), on conditions_v2's tasks and images.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from trainer.checkpoints import load_state
from trainer.models import ResNet18
from trainer.rundir import RunDir

from .condition_ceiling import add_scoring_arguments, condition_means, score_cells
from .condition_headroom import STREAMS, bn_adapt, stream_rows
from .condition_report import evaluation_tasks, open_run

PROXIES = ("bn", "entropy")
ROWS = ("generic_cs", "condition_basis", *(f"bn_adapt_{s}" for s in STREAMS),
        *(f"stream_{p}_{s}" for p in PROXIES for s in STREAMS))
BATCH = 500


class BatchNormInputs:
    """Forward hooks on every batch norm of `model`: each image's per-channel mean and mean square of the
    layer's input, so that the statistics of any subset of images (a stream) are exact averages of them."""

    def __init__(self, model: ResNet18):
        self.norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
        self.means: list[list[torch.Tensor]] = [[] for _ in self.norms]
        self.squares: list[list[torch.Tensor]] = [[] for _ in self.norms]
        for i, norm in enumerate(self.norms):
            norm.register_forward_pre_hook(lambda _m, args, i=i: self._record(i, args[0]))

    def _record(self, i: int, x: torch.Tensor) -> None:
        self.means[i].append(x.mean(dim=(2, 3)))
        self.squares[i].append((x * x).mean(dim=(2, 3)))

    def take(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """[(per-image means [N, C], mean squares [N, C])] per batch norm, of the images run since the last
        take (so the network the recorder watches must run nothing else)."""
        out = [(torch.cat(m), torch.cat(s)) for m, s in zip(self.means, self.squares, strict=True)]
        for lists in (self.means, self.squares):
            for values in lists:
                values.clear()
        return out


def basis_pass(model: ResNet18, recorder: BatchNormInputs, state: dict, x: torch.Tensor) -> dict:
    """One basis on a cell's images: its logits, each image's batch-norm input moments, its running stats."""
    model.load_state_dict(state)
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(x[i:i + BATCH]) for i in range(0, len(x), BATCH)])
    running = [(n.running_mean.clone(), n.running_var.clone()) for n in recorder.norms]
    return {"logits": logits, "moments": recorder.take(), "running": running}


def statistics_mismatch(moments: list[tuple[torch.Tensor, torch.Tensor]], running: list[tuple], rows) -> float:
    """KL(stream || basis) of each channel's Gaussian, averaged over channels, then over batch norms: the
    stream is the images `rows`, its mean and (biased) variance exact averages over its images' moments."""
    rows = torch.as_tensor(rows)
    total = 0.0
    for (means, squares), (mu_q, var_q) in zip(moments, running, strict=True):
        mu = means[rows].mean(0)
        var = (squares[rows].mean(0) - mu * mu).clamp_min(1e-5)
        kl = 0.5 * (torch.log(var_q / var) + (var + (mu - mu_q) ** 2) / var_q - 1)
        total += float(kl.mean())
    return total / len(moments)


def mean_entropy(logits: torch.Tensor, task: np.ndarray) -> float:
    """Mean entropy of the softmax over the task's classes (classifier selection's classes)."""
    log_p = torch.log_softmax(logits[:, torch.as_tensor(task)], dim=1)
    return float(-(log_p.exp() * log_p).sum(1).mean())


def choose(passes: list[dict], rows: np.ndarray, task: np.ndarray) -> dict[str, int]:
    """{proxy: the basis it picks from the stream `rows` of one task}."""
    return {"bn": int(np.argmin([statistics_mismatch(p["moments"], p["running"], rows) for p in passes])),
            "entropy": int(np.argmin([mean_entropy(p["logits"][torch.as_tensor(rows)], task) for p in passes]))}


def networks_of(run_dir: Path, folder: Path | None) -> tuple[dict, list[dict]]:
    """(the generic network, the bases in the conditions' order): the run's baseline and bank, or from
    `folder` (lab/condition_width.py's: generic_same_compute.pt and oracle_<condition>.pt)."""
    config, _, taper, _ = open_run(run_dir)
    if folder is None:
        return (load_state(RunDir(run_dir).model("baseline")),
                [taper.bank.basis_state_dict(q) for q in range(taper.bank.num_bases)])
    return (torch.load(folder / "generic_same_compute.pt", weights_only=True),
            [torch.load(folder / f"oracle_{name}.pt", weights_only=True) for name in config.conditions])


def score(run_dir: Path, task_seeds: list[int], task_every: int, images_per_class: int, progress=print,
          folder: Path | None = None, width: float | None = None) -> dict:
    """The cells of every row and, per proxy and stream, the bases picked on each cell; the networks are
    the run's, or those in `folder` (of `width`, on the run's tasks and images)."""
    config, ctx, _, _ = open_run(run_dir)
    if width is not None:
        ctx = replace(ctx, model_config=replace(ctx.model_config, width=width))
    names = config.conditions
    tasks = evaluation_tasks(config, ctx, task_seeds, task_every)
    generic, bases = networks_of(run_dir, folder)
    model, probe = ResNet18(ctx.model_config), ResNet18(ctx.model_config)   # (c)'s and the proxy's
    recorder = BatchNormInputs(probe)
    picks: dict[str, dict] = {}

    def streamed(name: str, severity: int, evaluator) -> dict[str, float]:
        passes = [basis_pass(probe, recorder, state, evaluator.x) for state in bases]
        streams = stream_rows(evaluator, tasks, severity)   # (c) and the proxies read the same images
        out = {row: round(acc, 2) for row, acc in bn_adapt(evaluator, model, generic, tasks, streams).items()}
        for stream, rows in streams.items():
            chosen = [choose(passes, rows[i], task) for i, task in enumerate(tasks)]
            for proxy in PROXIES:
                row = f"stream_{proxy}_{stream}"
                picked = [c[proxy] for c in chosen]

                def logits_for(i, _task, idx, picked=picked):   # the picked basis's logits on the task's images
                    return passes[picked[i]]["logits"][idx]

                out[row] = round(evaluator.accumulate(tasks, logits_for)[0], 2)
                picks.setdefault(row, {}).setdefault(name, {})["clean" if severity == 0 else f"s{severity}"] = picked
        return out

    def networks(name: str) -> dict:
        return {"generic_cs": generic, "condition_basis": bases[names.index(name)]}

    scored = score_cells(ctx, ctx.conditions, names, ("generic_cs", "condition_basis"), networks, tasks,
                         images_per_class, lambda line: progress(f"[stream] {line}"), extra=streamed)
    return {**scored, "picks": picks}


def pick_summary(picks: dict, names: list[str]) -> dict:
    """Per proxy row: the share of task-cells whose pick is the true condition's basis, per condition and
    over the non-clean ones, and what was picked instead per condition (by condition name)."""
    out = {}
    for row, by_condition in picks.items():
        right = {c: float(np.mean([p == names.index(c) for cell in v.values() for p in cell]))
                 for c, v in by_condition.items()}
        wrong = {c: dict(Counter(names[p] for cell in v.values() for p in cell if p != names.index(c)).most_common(3))
                 for c, v in by_condition.items()}
        non_clean = [p == names.index(c) for c, v in by_condition.items() if c != "clean" for cell in v.values()
                     for p in cell]
        out[row] = {"true_basis_share": {c: round(r, 3) for c, r in right.items()},
                    "true_basis_share_non_clean": round(float(np.mean(non_clean)), 3), "instead": wrong}
    return out


def markdown(result: dict, names: list[str]) -> str:
    per = result["per_condition"]
    lines = [f"# The condition from unlabelled images (issue 50, part 4, lab)\n\n`{result['command']}` "
             f"({result['protocol']['tasks']} tasks, {result['seconds']:.0f} s; protocol and prediction: "
             "docs/results/experiments.md, \"The condition from unlabelled images\").\n",
             "| row | " + " | ".join(names) + " | mean non-clean |", "|---" * (len(names) + 2) + "|"]
    for row in ROWS:
        lines.append(f"| {row} | " + " | ".join(f"{per[c][row]:.2f}" for c in names)
                     + f" | {result['accuracy'][row]:.2f} |")
    lines += ["", "How often each proxy picked the true condition's basis (task-cells):", "",
              "| row | " + " | ".join(names) + " | non-clean |", "|---" * (len(names) + 2) + "|"]
    for row, summary in result["picks"].items():
        share = summary["true_basis_share"]
        lines.append(f"| {row} | " + " | ".join(f"{share[c]:.2f}" for c in names)
                     + f" | {summary['true_basis_share_non_clean']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.condition_stream", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True, help="a finished run whose bases are one per condition")
    parser.add_argument("--networks", type=Path, default=None,
                        help="score lab.condition_width's networks in this folder instead of the run's")
    parser.add_argument("--width", type=float, default=None, help="the width of the --networks (default: the run's)")
    add_scoring_arguments(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    began = time.perf_counter()
    scored = score(args.run, args.seeds, args.task_every, args.images_per_class, folder=args.networks,
                   width=args.width)
    names = list(open_run(args.run)[0].conditions)
    per_condition, accuracy = condition_means(scored["cells"], tuple(names), ROWS)
    result = {
        "command": " ".join(["python -m lab.condition_stream", *(argv or sys.argv[1:])]),
        "protocol": {"task_seeds": args.seeds, "task_every": args.task_every,
                     "images_per_class": args.images_per_class, "tasks": scored["tasks"], "streams": STREAMS},
        "accuracy": accuracy,
        "per_condition": per_condition,
        "picks": pick_summary(scored["picks"], names),
        "cells": scored["cells"],
        "seconds": round(time.perf_counter() - began, 1),
    }
    print(markdown(result, names))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
        args.out.with_suffix(".md").write_text(markdown(result, names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
