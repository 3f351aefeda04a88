"""How much training signal each stage of a run had left, read from its log.jsonl: the training
accuracy and loss at the end of stage 1 (its last tenth of logged steps), the first logged loss of each
stage-2 basis, and stage 3's (TAPER's) first logged losses. A stage whose first loss is near zero starts
on images the network has already fitted (issue 12: the full-width paper run memorised Tiny ImageNet).

    python -m lab.training_signal /root/taper-runs/paper-w025-n100 /root/taper-runs/paper-w025-n100-half
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from statistics import median

from trainer.rundir import RunDir


def _summary(values: list[float], scale: float = 1.0) -> dict:
    return {"median": round(scale * median(values), 4), "min": round(scale * min(values), 4),
            "max": round(scale * max(values), 4), "n": len(values)}


def _last_tenth(steps: list[dict]) -> list[dict]:
    return steps[-max(1, len(steps) // 10):]


def training_signal(run_dir: Path) -> dict:
    """Per stage of `run_dir`'s log: training accuracy (%) and loss where the stage ends or starts."""
    by_stage: dict[str, list[dict]] = {}
    for record in map(json.loads, RunDir(run_dir).log.read_text().splitlines()):
        if "loss" in record and "step" in record:   # logged steps, not epoch or stage events
            by_stage.setdefault(record["stage"], []).append(record)
    result = {"run": str(run_dir)}
    for stage in ("stage1", "baseline"):
        if steps := by_stage.get(stage):
            end = _last_tenth(steps)
            result[stage] = {"first_loss": round(steps[0]["loss"], 4),
                             "end_acc": _summary([r["acc"] for r in end], 100.0),
                             "end_loss": _summary([r["loss"] for r in end])}
    first_losses = [steps[0]["loss"] for stage, steps in by_stage.items() if stage.startswith("stage2.basis")]
    if first_losses:
        result["stage2_first_loss_per_basis"] = _summary(first_losses)
    if steps := by_stage.get("stage3"):
        first_epoch = [r["loss"] for r in steps if r["epoch"] == steps[0]["epoch"]]
        result["stage3"] = {"first_loss": round(steps[0]["loss"], 4), "first_epoch_loss": _summary(first_epoch),
                            "end_loss": _summary([r["loss"] for r in _last_tenth(steps)]),
                            # nats; log Q for uniform routing (2.30 at Q=10)
                            "end_mixer_entropy": _summary([r["mixer_entropy"] for r in _last_tenth(steps)])}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, help="write the list of results here as JSON")
    args = parser.parse_args()
    results = [training_signal(run_dir) for run_dir in args.runs]
    text = json.dumps(results, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
