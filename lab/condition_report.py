"""Field conditions, part 3: TAPER over conditions against the headroom's baselines (issue 50).

The protocol, the rows and the predictions were committed to docs/results/experiments.md ("TAPER over
conditions, pre-registered") before any accuracy of the `conditions` preset was measured. Every row is
scored on the same tasks (every `--task-every`-th task of the fixed sets of the task seeds) and the same
images (the first `--images-per-class` val images of each class), under each condition at severities 3
and 5 (clean: the clean val images), with classifier selection:
- clean_generic_cs (a), condition_oracle (e): the headroom experiment's networks (`--headroom-work`,
  lab/condition_headroom.py), re-scored here; skipped without it.
- generic_cs (b): the run's baseline (stage 1 continued on all conditions for stages 2 + 3's epochs);
  bn_adapt_* (c) and condition_bn (d) on it, as in the headroom protocol.
- taper: the mixer on the task's condition phrases + class names; taper_no_condition: on the class names
  alone; taper_wrong_condition: on the next condition's phrases (the set's order, cyclic);
  uniform_average: every basis at 1/Q; condition_basis: the true condition's basis alone.
Besides the rows: the mixer's routing per condition, and (a diagnostic added after the rows were fixed)
condition q's stage-2 basis alone, before stage 3 trained the bank. Scores are kept in
RUN_DIR/condition_cells.json, so `--reuse-cells` rewrites the report without scoring again.

    python -m lab.condition_report /root/runs/conditions --headroom-work /root/cond-headroom \\
        --out docs/results/conditions
    python -m lab.condition_report /tmp/cond-tiny --task-every 1 --images-per-class 4      # a tiny run
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from trainer.checkpoints import load_state
from trainer.config import TrainConfig
from trainer.data.tasks import TaskSampler
from trainer.evaluate import Evaluator
from trainer.models import NUM_BLOCKS, ResNet18
from trainer.run import load_taper, make_context
from trainer.rundir import RunDir

from .condition_headroom import ROWS as HEADROOM_ROWS
from .condition_headroom import bn_adapt, condition_bn_state, severities, stream_rows, val_images

ROWS = (
    *HEADROOM_ROWS,   # (a)-(e), as the headroom experiment names them
    "taper",
    "taper_no_condition",
    "taper_wrong_condition",
    "uniform_average",
    "condition_basis",
)
HEADROOM_NETWORKS = {"clean_generic_cs": "clean_generic", "condition_oracle": "oracle_{condition}"}


@functools.cache
def open_run(run_dir: Path):
    """(config, stage context, TAPER, its embedder) of a finished run over conditions, opened once per
    process (the scoring, the stage-2 diagnostic and the routing all read the same run)."""
    config = TrainConfig.load(RunDir(run_dir).config)
    if not config.conditions:
        raise ValueError(f"{run_dir} is not a run over conditions (its config has no `conditions`)")
    ctx = make_context(run_dir, config, progress=False)
    return (config, ctx, *load_taper(ctx, run_dir))


def evaluation_tasks(config: TrainConfig, ctx, task_seeds: list[int], task_every: int) -> list[np.ndarray]:
    sampler = TaskSampler(ctx.data.hierarchy, k=config.task_k)
    return [t for seed in task_seeds for t in sampler.evaluation_tasks(seed)[::task_every]]


def score_run(run_dir: Path, headroom_work: Path | None, task_seeds: list[int], task_every: int,
              images_per_class: int, progress=print, taper_only: bool = False, device: str = "cpu") -> dict:
    """{row: {condition: {"s3": acc, "s5": acc} or {"clean": acc}}} and the seconds each row took;
    `taper_only`: the taper row alone (a second stage-3 seed); `device`: where the networks run."""
    config, ctx, taper, embedder = open_run(run_dir)
    conditions, names = ctx.conditions, config.conditions
    evaluator = Evaluator(ctx.data, ctx.model_config, ctx.preprocessing, images_per_class=images_per_class,
                          device=device)
    keep, clean_x = evaluator.rows, evaluator.x
    tasks = evaluation_tasks(config, ctx, task_seeds, task_every)
    bank = taper.bank
    generic = load_state(RunDir(run_dir).model("baseline"))
    model = ResNet18(ctx.model_config).to(device)   # (c) and (d) re-estimate batch norms with it
    uniform = bank.state_dict_for(torch.full((NUM_BLOCKS, bank.num_bases), 1.0 / bank.num_bases))
    seconds = dict.fromkeys(ROWS, 0.0)
    per: dict[str, dict] = {row: {} for row in ROWS}

    def headroom_state(row: str, name: str) -> dict | None:
        if headroom_work is None:
            return None
        return torch.load(headroom_work / (HEADROOM_NETWORKS[row].format(condition=name) + ".pt"), weights_only=True)

    def mixed(description_conditions: list[int] | None):
        with torch.no_grad():
            alphas = taper.alpha(embedder(tasks, conditions=description_conditions))
        return lambda i, task: bank.state_dict_for(alphas[i])

    for q, name in enumerate(names):
        condition_bn = None if taper_only else condition_bn_state(model, generic, conditions, name, ctx.preprocessing)
        static = {"generic_cs": generic, "condition_bn": condition_bn, "uniform_average": uniform,
                  "condition_basis": bank.basis_state_dict(q)}
        for row in HEADROOM_NETWORKS:
            if (state := headroom_state(row, name)) is not None:
                static[row] = state
        per_task = {"taper": mixed([q] * len(tasks)), "taper_no_condition": mixed(None),
                    "taper_wrong_condition": mixed([(q + 1) % len(names)] * len(tasks))}
        if taper_only:
            static, per_task = {}, {"taper": per_task["taper"]}
        for s in severities(name):
            evaluator.x = clean_x if name == "clean" else val_images(conditions, name, s, ctx.preprocessing,
                                                                     keep).to(device)
            key = "clean" if s == 0 else f"s{s}"
            for row, state in static.items():
                began = time.perf_counter()
                per[row].setdefault(name, {})[key] = round(evaluator.static(evaluator.logits(state), tasks)[0], 2)
                seconds[row] += time.perf_counter() - began
            for row, state_for in per_task.items():
                began = time.perf_counter()
                per[row].setdefault(name, {})[key] = round(evaluator.per_task(state_for, tasks)[0], 2)
                seconds[row] += time.perf_counter() - began
            began = time.perf_counter()
            adapted = {} if taper_only else bn_adapt(evaluator, model, generic, tasks, stream_rows(evaluator, tasks, s))
            for row, score in adapted.items():
                per[row].setdefault(name, {})[key] = round(score, 2)
            seconds["bn_adapt_iid_16"] += time.perf_counter() - began  # the three (c) rows together
            progress(f"[conditions] {name} {key}: " + ", ".join(
                f"{row} {per[row][name][key]:.2f}" for row in ROWS if name in per[row]))
    return {"cells": {row: v for row, v in per.items() if v}, "tasks": len(tasks),
            "images": int(len(keep)), "row_seconds": {k: round(v, 1) for k, v in seconds.items() if v}}


def stage2_bases(run_dir: Path, task_seeds: list[int], task_every: int, images_per_class: int,
                 device: str = "cpu") -> dict:
    """A diagnostic added after the pre-registered rows: condition q's stage-2 basis alone (before stage 3
    trained the bank), on condition q, by the same protocol: {condition: {"s3": acc, ...}}."""
    config, ctx, _, _ = open_run(run_dir)
    evaluator = Evaluator(ctx.data, ctx.model_config, ctx.preprocessing, images_per_class=images_per_class,
                          device=device)
    keep, clean_x = evaluator.rows, evaluator.x
    tasks = evaluation_tasks(config, ctx, task_seeds, task_every)
    out = {}
    for q, name in enumerate(config.conditions):
        state = load_state(RunDir(run_dir).basis(q))
        for s in severities(name):
            evaluator.x = clean_x if name == "clean" else val_images(ctx.conditions, name, s, ctx.preprocessing,
                                                                     keep).to(device)
            key = "clean" if s == 0 else f"s{s}"
            out.setdefault(name, {})[key] = round(evaluator.static(evaluator.logits(state), tasks)[0], 2)
    return out


def routing(run_dir: Path, task_seeds: list[int], task_every: int) -> dict:
    """Where the mixer sends each condition's tasks: the mean weight of the condition's own basis per block,
    and the share of (task, block) rows whose heaviest basis is its own; the same with no condition phrase."""
    config, ctx, taper, embedder = open_run(run_dir)
    tasks = evaluation_tasks(config, ctx, task_seeds, task_every)
    out = {}
    with torch.no_grad():
        plain = taper.alpha(embedder(tasks)).numpy()
        for q, name in enumerate(config.conditions):
            alpha = taper.alpha(embedder(tasks, conditions=[q] * len(tasks))).numpy()   # [T, 4, Q]
            out[name] = {"own_weight_per_block": [round(float(v), 3) for v in alpha[:, :, q].mean(0)],
                         "own_is_heaviest": round(float((alpha.argmax(-1) == q).mean()), 3),
                         "no_phrase_weight_per_block": [round(float(v), 3) for v in plain[:, :, q].mean(0)]}
    return out


def summarise(cells: dict, names: tuple[str, ...]) -> dict:
    """accuracy (mean over non-clean conditions of the mean over severities), clean, per_condition, and the
    differences the issue's targets name."""
    per_condition = {name: {} for name in names}
    accuracy, clean = {}, {}
    for row, by_condition in cells.items():
        means = {c: float(np.mean(list(v.values()))) for c, v in by_condition.items()}
        for c, m in means.items():
            per_condition[c][row] = round(m, 2)
        accuracy[row] = round(float(np.mean([m for c, m in means.items() if c != "clean"])), 2)
        clean[row] = round(means["clean"], 2) if "clean" in means else None
    for row in ROWS:
        accuracy.setdefault(row, None)
    b = accuracy["generic_cs"]
    best_cd = max(accuracy["bn_adapt_iid_64"], accuracy["condition_bn"])
    deltas = {c: round(per_condition[c]["taper"] - per_condition[c]["generic_cs"], 2) for c in names}
    out = {
        "accuracy": accuracy,
        "clean": clean,
        "per_condition": per_condition,
        "taper_minus_generic": round(accuracy["taper"] - b, 2),
        "taper_minus_generic_per_condition": deltas,
        "taper_minus_best_of_c_d": round(accuracy["taper"] - best_cd, 2),
        "taper_minus_uniform_average": round(accuracy["taper"] - accuracy["uniform_average"], 2),
        "condition_basis_minus_generic": round(accuracy["condition_basis"] - b, 2),
    }
    if accuracy["condition_oracle"] is not None:
        out["ceiling_minus_generic"] = round(accuracy["condition_oracle"] - b, 2)
    return out


def targets(summary: dict, names: tuple[str, ...]) -> dict:
    """The issue's targets, each with the measured value and whether it was met."""
    worst = min(summary["taper_minus_generic_per_condition"][c] for c in names if c != "clean")
    clean = summary["taper_minus_generic_per_condition"].get("clean")
    rows = {
        "taper_minus_generic >= +3.0": summary["taper_minus_generic"],
        "no condition below (b) - 0.5": worst,
        "clean not below (b) - 0.5": clean,
        "taper_minus_best_of_c_d >= +1.0": summary["taper_minus_best_of_c_d"],
        "taper_minus_uniform_average >= +1.0": summary["taper_minus_uniform_average"],
    }
    limits = [3.0, -0.5, -0.5, 1.0, 1.0]
    return {k: {"value": v, "met": v is not None and v >= lim} for (k, v), lim in zip(rows.items(), limits,
                                                                                      strict=True)}


def table(result: dict, names: tuple[str, ...]) -> str:
    per = result["per_condition"]
    lines = ["| row | " + " | ".join(names) + " | mean non-clean |", "|---|" + "---|" * (len(names) + 1)]
    for row in ROWS:
        if result["accuracy"].get(row) is None:
            continue
        cells = [f"{per[c][row]:.2f}" if row in per[c] else "" for c in names]
        lines.append(f"| {row} | " + " | ".join(cells) + f" | {result['accuracy'][row]:.2f} |")
    cells = [f"{result['taper_minus_generic_per_condition'][c]:+.2f}" for c in names]
    lines.append("| taper - generic_cs | " + " | ".join(cells) + f" | {result['taper_minus_generic']:+.2f} |")
    return "\n".join(lines)


def markdown(result: dict, names: tuple[str, ...]) -> str:
    """The report: command, protocol, the table, the targets, the variants and the diagnostics."""
    p = result["protocol"]
    lines = [f"# TAPER over field conditions (`{result['command']}`)", "",
             f"{p['tasks']} tasks (every {p['task_every']}th of task seeds {p['task_seeds']}), the first "
             f"{p['images_per_class']} val images of each class, severities 3 and 5; classifier selection. "
             f"Rows (a) and (e) are the networks in {p['headroom_work']}; (b), (c), (d) and TAPER are this run's "
             f"((b): stage 1 continued for stages 2 and 3, {p.get('generic_epochs', 21):g} epochs in all). Method "
             f"wall time {result['wall_time_method_s']:.0f} s.", "",
             table(result, names), "", "| target | value | met |", "|---|---|---|"]
    lines += [f"| {k} | {v['value']:+.2f} | {'yes' if v['met'] else 'no'} |" for k, v in result["targets"].items()]
    phrases = result.get("condition_phrases") or {}
    if phrases.get("precision") is not None:
        lines += ["", f"Condition phrasings ({phrases['source']}, a lab resolver): precision "
                      f"{phrases['precision']:.3f}, recall {phrases['recall']:.3f} on {phrases['n']} held-out "
                      f"phrasings (target >= 0.9 both: {'met' if phrases['met'] else 'not met'})."]
    seeds = result.get("stage3_seeds")
    if seeds:
        lines += ["", f"Stage-3 seeds: TAPER {seeds['taper']} (std {seeds['stage3_seed_std']})."]
    for run, v in result.get("variants", {}).items():
        lines += ["", f"Variant `{run}` (stage3_mixer_init={v['config']['stage3_mixer_init']}): TAPER "
                      f"{v['taper']:.2f}, {v['taper_minus_generic']:+.2f} against generic_cs."]
    d = result.get("diagnostics", {}).get("stage2_condition_basis")
    if d:
        lines += ["", f"Diagnostic (after the rows were fixed): each condition's stage-2 basis alone, before stage "
                      f"3: {d['mean_non_clean']:.2f} mean non-clean, clean {d['per_condition']['clean']:.2f}."]
    return "\n".join(lines) + "\n"


def phrase_scores(path: Path) -> dict:
    """Part 4's phrase target as lab/condition_phrase_resolver.py scored it (held-out phrasings; the
    pooled set with retrieval descriptions as negatives beside it); None where it has not been scored."""
    if not path.exists():
        return {"precision": None, "recall": None, "note": f"{path} not found: the phrase resolver not scored"}
    scored = json.loads(path.read_text())
    held_out, pooled = scored["phrasings"], scored["together"]
    return {"precision": held_out["precision"], "recall": held_out["recall"], "n": held_out["n"],
            "met": held_out["precision"] >= 0.9 and held_out["recall"] >= 0.9,
            "pooled_with_negatives": {k: pooled[k] for k in ("n", "precision", "recall")},
            "source": str(path), "note": "a lab resolver (not product code): the product path is gated"}


def method_wall_time(run_dir: Path) -> dict:
    """The run's wall time per stage (metrics.json) and the method's sum: class embeddings and stages 1-3
    (the baseline is the comparison's, not the method's)."""
    walls = json.loads(RunDir(run_dir).metrics.read_text())["wall_time_s"]
    method = sum(walls.get(k, 0.0) for k in ("class_embeddings", "stage1", "stage2", "stage3_taper"))
    return {"stages": walls, "method_s": round(method, 1)}


def taper_cells(run_dir: Path, args) -> dict:
    """The taper row alone of another run over the same conditions (a stage-3 seed or recipe)."""
    scored = score_run(run_dir, None, args.seeds, args.task_every, args.images_per_class, taper_only=True,
                       device=args.device)
    return scored["cells"]["taper"]


def headline(cells: dict) -> float:
    """Mean over the non-clean conditions of the mean over severities."""
    return round(float(np.mean([np.mean(list(v.values())) for c, v in cells.items() if c != "clean"])), 2)


def variant(run_dir: Path, cells: dict, generic: float) -> dict:
    """A stage-3 variant's taper row: its headline, minus (b), per condition, and how its config differs."""
    ours = TrainConfig.load(RunDir(run_dir).config).to_dict()
    return {"taper": headline(cells), "taper_minus_generic": round(headline(cells) - generic, 2),
            "per_condition": {c: round(float(np.mean(list(v.values()))), 2) for c, v in cells.items()},
            "config": ours, "cells": cells}


def seed_spread(run_dir: Path, seed_taper: dict[str, float], result_taper: float) -> dict | None:
    """TAPER's headline on this run and on its stage-3 seed runs, and their sample std."""
    if not seed_taper:
        return None
    values = [result_taper, *seed_taper.values()]
    return {"runs": [str(run_dir), *seed_taper], "taper": values,
            "stage3_seed_std": round(float(np.std(values, ddof=1)), 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.condition_report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, help="a finished run of the `conditions` preset")
    parser.add_argument("--headroom-work", type=Path, default=None,
                        help="lab.condition_headroom's --work folder: rows (a) and (e)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="task seeds")
    parser.add_argument("--task-every", type=int, default=5, help="score every n-th task of each seed's set")
    parser.add_argument("--images-per-class", type=int, default=10, help="val images of each class scored")
    parser.add_argument("--seed-runs", type=Path, nargs="*", default=[],
                        help="runs made with --reuse-from RUN_DIR --set stage3_seed=N (stage3_seed_std)")
    parser.add_argument("--variant-runs", type=Path, nargs="*", default=[],
                        help="runs that differ from RUN_DIR in stage 3 only: their taper row, beside the rest")
    parser.add_argument("--reuse-cells", action="store_true",
                        help="summarise the scores a previous run left in RUN_DIR/condition_cells.json")
    parser.add_argument("--phrases", type=Path, default=Path("docs/results/condition_phrases.json"),
                        help="lab.condition_phrase_resolver's result: condition_phrases.{precision, recall}")
    parser.add_argument("--device", default="cpu", help="where the networks run: cpu or cuda (the GPU run)")
    parser.add_argument("--out", type=Path, default=None, help="write <OUT>.json and <OUT>.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    began = time.perf_counter()
    config = TrainConfig.load(RunDir(args.run_dir).config)
    names = config.conditions
    # The scores before any summary, this run's and each seed run's TAPER: --reuse-cells reads them back.
    cells_path = args.run_dir / "condition_cells.json"
    saved = json.loads(cells_path.read_text()) if args.reuse_cells and cells_path.exists() else {}
    if "scored" not in saved:
        saved["scored"] = score_run(args.run_dir, args.headroom_work, args.seeds, args.task_every,
                                    args.images_per_class, device=args.device)
        cells_path.write_text(json.dumps(saved, indent=1))
    if "stage2_basis" not in saved:
        saved["stage2_basis"] = stage2_bases(args.run_dir, args.seeds, args.task_every, args.images_per_class,
                                             args.device)
        cells_path.write_text(json.dumps(saved, indent=1))
    scored = saved["scored"]
    variant_cells = saved.setdefault("variant_cells", {})
    for other in map(str, [*args.seed_runs, *args.variant_runs]):
        if other not in variant_cells:
            variant_cells[other] = taper_cells(Path(other), args)
            cells_path.write_text(json.dumps(saved, indent=1))
    seed_taper = {run: headline(variant_cells[run]) for run in map(str, args.seed_runs)}
    summary = summarise(scored["cells"], names)
    result = {
        "command": " ".join(["python -m lab.condition_report", *(argv if argv is not None else sys.argv[1:])]),
        "protocol": {"task_seeds": args.seeds, "task_every": args.task_every, "tasks": scored["tasks"],
                     "images_per_class": args.images_per_class, "images": scored["images"],
                     "conditions": list(names), "run": str(args.run_dir),
                     "headroom_work": str(args.headroom_work) if args.headroom_work else None,
                     "generic_epochs": round(config.stage1_epochs + config.stage2_epochs + config.stage3_epochs, 2)},
        **summary,
        "targets": targets(summary, names),
        "condition_phrases": phrase_scores(args.phrases),
        "wall_time_method_s": method_wall_time(args.run_dir)["method_s"],
        "wall_time_s": method_wall_time(args.run_dir)["stages"],
        "stage3_seeds": seed_spread(args.run_dir, seed_taper, summary["accuracy"]["taper"]),
        "routing": routing(args.run_dir, args.seeds, args.task_every),
        "variants": {run: variant(Path(run), variant_cells[run], summary["accuracy"]["generic_cs"])
                     for run in map(str, args.variant_runs)},
        "diagnostics": {"stage2_condition_basis": {
            "note": "added after the pre-registered rows: condition q's stage-2 basis alone, before stage 3",
            "mean_non_clean": round(float(np.mean([np.mean(list(v.values())) for c, v in saved["stage2_basis"].items()
                                                   if c != "clean"])), 2),
            "per_condition": {c: round(float(np.mean(list(v.values()))), 2) for c, v in saved["stage2_basis"].items()},
            "cells": saved["stage2_basis"]}},
        "cells": scored["cells"],
        "row_seconds": scored["row_seconds"],
        "seconds": round(time.perf_counter() - began, 1),
    }
    result["stage3_seed_std"] = result["stage3_seeds"]["stage3_seed_std"] if result["stage3_seeds"] else None
    text = json.dumps(result, indent=1)
    print(text)
    print(table(result, names))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(text + "\n")
        args.out.with_suffix(".md").write_text(markdown(result, names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
