"""Collect `python -m lab bases` and `python -m lab oracle` results into one report (issue 12).

    python -m lab.headroom_report --bases name=path.json [name=path.json ...] \
        --oracle [name=]oracle.json [...] --out docs/results/headroom
    python -m lab.headroom_report --extend docs/results/headroom.json --bases new=path.json \
        --out docs/results/headroom       # the report so far, plus new rows (the runs' files may be gone)

Writes <out>.json (the inputs, unchanged, under their names) and <out>.md (one table row per run).
Each figure comes from the named JSON file; this script computes nothing but differences.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

COLUMNS = [("reference", "CS (reference)"), ("shard_basis", "majority-shard basis"),
           ("best_single_basis", "best single basis (oracle)"),
           ("best_single_basis_crossval", "best single basis, picked on the other half of val"),
           ("uniform_average", "uniform average"),
           ("shard_router", "shard router"), ("taper", "TAPER"), ("stage3_uniform_average", "stage-3 uniform"),
           ("stage3_shard_router", "stage-3 router")]


# The parts of a run's recipe named in its row only when the run sets them, in this order:
# (config key, value of the runs before the key existed, label).
RECIPE_OPTIONS = [("aug_crop_scale", 0.0, "random-resized crops from area"),
                  ("stage2_seed", None, "stage-2 seed"), ("stage2_other_class", False, "other class"),
                  ("stage3_seed", None, "stage-3 seed"),
                  ("stage3_lr", 0.01, "stage-3 lr"), ("stage3_epochs", 6, "stage-3 epochs"),
                  ("stage3_bases", "each", "stage-3 bases"), ("stage3_loss", "task", "stage-3 loss"),
                  ("stage3_weight_decay", None, "stage-3 decay"), ("stage3_warmup_epochs", 0, "stage-3 warm-up"),
                  ("stage3_bn", "frozen", "stage-3 BN"), ("tasks_per_batch", 2, "tasks per batch"),
                  ("mixer_lr", 0.1, "mixer lr")]


def stage2_recipe(config: dict) -> str:
    shards = f"shards of {config['stage2_shard_size']}" if config.get("stage2_shard_size") else "partition shards"
    width = f"width {config['width']:g}, " if config.get("width", 0.25) != 0.25 else ""
    return (f"{width}stage 1 {config['stage1_epochs']:g} epochs; Q={config['num_bases']}, {shards}, "
            f"{config['stage2_epochs']:g} epochs, lr {config['stage2_lr']:g}, "
            f"general {config['stage2_general_fraction']:g}, distill {config.get('stage2_distill', 0):g}, "
            f"mixer init {config.get('stage3_mixer_init', 'uniform')}"
            + "".join(f", {label} {_number(config[key])}" for key, default, label in RECIPE_OPTIONS
                      if config.get(key, default) != default))


def _number(value):
    """Floats as the table has always written the learning rate and epochs (0.01, 6, 0); others as they are."""
    return f"{value:g}" if isinstance(value, float) else value


def seed_spread(bases: dict[str, dict], names: list[str]) -> dict:
    """TAPER of runs that differ only in their stage-3 seed: each, the mean and the sample std, and the two
    target margins (over CS, and over the uniform average of the run's own stage-3 bases)."""
    acc = [bases[n]["accuracy"] for n in names]
    taper = [a["taper"] for a in acc]
    return {"runs": names, "task_seeds": bases[names[0]].get("seeds", bases[names[0]]["config"]["eval_seeds"]),
            "taper": taper, "taper_minus_cs": [round(a["taper"] - a["reference"], 2) for a in acc],
            "taper_minus_uniform": [round(a["taper"] - a["stage3_uniform_average"], 2) for a in acc],
            "mean": round(statistics.mean(taper), 2), "stage3_seed_std": round(statistics.stdev(taper), 2)}


def markdown(bases: dict[str, dict], oracles: dict[str, dict] | None, spread: dict | None = None) -> str:
    lines = ["# Headroom and specialists (issue 12)", "",
             "Neighbourhood (paper-protocol) tasks unless the seeds cell says super-category, k=20, classifier "
             "selection everywhere; accuracy in %. "
             "Reference = classifier selection with the baseline network, or with the stage-1 network when the "
             "run has no baseline. Specialist margin = mean over bases of (own-shard tasks' accuracy minus the "
             "reference's on them).", ""]
    header = "| run | stage 2 | seeds | " + " | ".join(label for _, label in COLUMNS) + \
             " | specialist margin | shards per task |"
    lines += [header, "|" + "---|" * (header.count("|") - 1)]
    for name, r in bases.items():
        acc = r["accuracy"]
        cells = [f"{acc[k]:.2f}" if k in acc else "-" for k, _ in COLUMNS]
        align = r["task_shard_alignment"]
        seeds = f"{r.get('seeds', r['config']['eval_seeds'])}" + (
            " super-category" if r.get("task_mode") == "supercategory" else "")
        lines.append(f"| {name} | {stage2_recipe(r['config'])} | {seeds} | "
                     + " | ".join(cells) + f" | {r['specialist_margin']:+.2f} | "
                     f"{align['shards_touched']:.2f} (majority {align['majority_share']:.2f}) |")
    lines += ["", "Per-basis specialist margins (points; '-' = the basis is the majority shard of no task):", ""]
    for name, r in bases.items():
        margins = ", ".join("-" if m is None else f"{m:+.2f}" for m in r["specialist_margin_per_basis"])
        lines.append(f"- {name}: {margins}")
    if spread:
        lines += ["", "## Stage-3 training seeds", "",
                  f"Runs that differ only in `stage3_seed` ({', '.join(spread['runs'])}): TAPER "
                  f"{', '.join(f'{t:.2f}' for t in spread['taper'])} (TAPER - CS "
                  f"{', '.join(f'{m:+.2f}' for m in spread['taper_minus_cs'])}; TAPER - stage-3 uniform "
                  f"{', '.join(f'{m:+.2f}' for m in spread['taper_minus_uniform'])}) on task seeds "
                  f"{spread['task_seeds']}; mean {spread['mean']:.2f}, sample std {spread['stage3_seed_std']:.2f} "
                  "points."]
    for name, oracle in (oracles or {}).items():
        g = oracle["gain"]
        lines += ["", f"## Per-task fine-tuning oracle: {name}", "", f"Stage 1: `{oracle['run_command']}`.", "",
                  f"{len(oracle['tasks'])} tasks (seed-0 tasks anchored at classes spread over the hierarchy); "
                  f"learning rate from {oracle['grid']['learning_rates']} and 1-{oracle['grid']['max_epochs']} "
                  f"epochs chosen on a held-out {oracle['grid']['selection_share']:.0%} of the task's training "
                  f"images. Reference: {oracle['reference']}. Time {oracle['time_s'] / 60:.1f} min."
                  + (" Choices at the grid's edge: {lowest_lr} at the lowest lr, {highest_lr} at the highest, "
                     "{last_epoch} at the last epoch.".format(**oracle["grid_edges"]) if "grid_edges" in oracle
                     else ""), "",
                  f"Fine-tuned {oracle['per_task_finetune']:.2f} vs classifier selection "
                  f"{oracle['per_task_finetune_cs']:.2f}: gain {g['mean']:+.2f} (std {g['std']:.2f}, "
                  f"min {g['min']:+.2f}, max {g['max']:+.2f})."
                  + (f" The best snapshot of the grid on val (an upper bound that peeks at val): gain "
                     f"{oracle['gain_best_on_val']:+.2f}." if "gain_best_on_val" in oracle else ""), "",
                  "| anchor | lr | epochs | fine-tuned | classifier selection | gain |", "|---|---|---|---|---|---|"]
        for t in oracle["tasks"]:
            lines.append(f"| {t['anchor'].split(',')[0]} | {t['lr']:g} | {t['epochs']} | {t['finetuned']:.2f} | "
                         f"{t['classifier_selection']:.2f} | {t['finetuned'] - t['classifier_selection']:+.2f} |")
    lines += ["", "Commands: see each run's `command` / `run_command` in the JSON file.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bases", nargs="+", default=[], metavar="NAME=PATH")
    parser.add_argument("--oracle", nargs="+", default=[], metavar="[NAME=]PATH",
                        help="`lab oracle` results, one per stage-1 network (a bare PATH is named 'oracle')")
    parser.add_argument("--seed-runs", nargs="+", default=[], metavar="NAME",
                        help="names (of --bases) of runs that differ only in stage3_seed: their spread")
    parser.add_argument("--extend", type=Path, default=None, metavar="REPORT.json",
                        help="start from this report's inputs (its runs, oracles and seed spread), then add")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    previous = json.loads(args.extend.read_text()) if args.extend else {}
    bases = dict(previous.get("bases", {}))
    for item in args.bases:
        name, _, path = item.partition("=")
        if name in bases:
            raise SystemExit(f"a run named {name!r} is already in the report")
        bases[name] = json.loads(Path(path).read_text())
    oracles = dict(previous.get("oracles") or {})
    for item in args.oracle:
        name, _, path = item.partition("=") if "=" in item else ("oracle", "", item)
        if name in oracles:
            raise SystemExit(f"an oracle named {name!r} is already in the report")
        oracles[name] = json.loads(Path(path).read_text())
    spread = seed_spread(bases, args.seed_runs) if len(args.seed_runs) >= 2 else previous.get("stage3_seeds")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"bases": bases, "oracles": oracles, "stage3_seeds": spread},
                                                        indent=1) + "\n")
    args.out.with_suffix(".md").write_text(markdown(bases, oracles, spread))
    print(f"wrote {args.out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
