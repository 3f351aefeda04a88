"""How much training signal each stage of a run had left, read from its log.jsonl: the training
accuracy and loss at the end of stage 1 (its last tenth of logged steps), the first logged loss of each
stage-2 basis, and stage 3's (TAPER's) first logged losses. A stage whose first loss is near zero starts
on images the network has already fitted (issue 12: the full-width paper run memorised Tiny ImageNet).

    python scripts/training_signal.py /root/taper-runs/paper-w025-n100 /root/taper-runs/paper-w025-n100-half
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from statistics import median


def _summary(values: list[float], scale: float = 1.0) -> dict:
    return {"median": round(scale * median(values), 4), "min": round(scale * min(values), 4),
            "max": round(scale * max(values), 4), "n": len(values)}


def training_signal(run_dir: Path) -> dict:
    """Per stage of `run_dir`'s log: training accuracy (%) and loss where the stage ends or starts."""
    steps = [r for r in map(json.loads, (run_dir / "log.jsonl").read_text().splitlines())
             if "loss" in r and "step" in r]
    by_stage: dict[str, list[dict]] = {}
    for record in steps:
        by_stage.setdefault(record["stage"], []).append(record)
    result = {"run": str(run_dir)}
    for stage in ("stage1", "baseline"):
        records = by_stage.get(stage, [])
        if records:
            tail = records[-max(1, len(records) // 10):]
            result[stage] = {"first_loss": round(records[0]["loss"], 4),
                             "end_acc": _summary([r["acc"] for r in tail], 100.0),
                             "end_loss": _summary([r["loss"] for r in tail])}
    bases = [records[0]["loss"] for stage, records in by_stage.items() if stage.startswith("stage2.basis")]
    if bases:
        result["stage2_first_loss_per_basis"] = _summary(bases)
    stage3 = by_stage.get("stage3", [])
    if stage3:
        first_epoch = [r["loss"] for r in stage3 if r["epoch"] == stage3[0]["epoch"]]
        result["stage3"] = {"first_loss": round(stage3[0]["loss"], 4), "first_epoch_loss": _summary(first_epoch),
                            "end_loss": _summary([r["loss"] for r in stage3[-max(1, len(stage3) // 10):]])}
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
