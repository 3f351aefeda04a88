"""Lab CLI: experiments that measure the method (docs/results/experiments.md), beside the product.

    python -m lab oracle runs/bench --tasks 20                 # per-task fine-tuning oracle -> runs/bench/oracle.json
    python -m lab oracle runs/bench --tasks 20 --bn frozen --lr 0.003 0.01 --epochs 8
    python -m lab bases runs/s2 --out s2.json                  # are the stage-2 bases specialists?
    python -m lab bases runs/s2 --tasks supercategory          # ... on super-category tasks
    python -m lab.headroom_report --bases s2=s2.json --oracle runs/bench/oracle.json --out docs/results/headroom

One-off drivers, each with its own --help: lab.bn_recalibration, lab.routing_usage, lab.routing_smoothing,
lab.stage1_accuracy, lab.training_signal, lab.fewshot_feature_transforms, lab.fewshot_mixed_heads.
Field conditions (issue 50): lab.condition_headroom (part 2), lab.condition_report (part 3).
Issue 60: lab.head_final (a resolver rule measured, not shipped). Issue 61: lab.int8_data_free,
lab.int8_range_sweep (the int8 ranges' width on training photos).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trainer.__main__ import run_command
from trainer.data.errors import DataError
from trainer.device import TrainDevice


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    bases = sub.add_parser("bases", help="stage-2 diagnostics: specialist margins, best single basis, shard router")
    bases.add_argument("run_dir", type=Path)
    bases.add_argument("--out", type=Path, default=None, help="also write the result as JSON here")
    bases.add_argument("--seeds", type=int, nargs="+", default=None, help="task seeds (default: the run's)")
    bases.add_argument("--tasks", choices=("neighbourhood", "supercategory"), default="neighbourhood",
                       help="task protocol (default: neighbourhood, the paper's)")
    bases.add_argument("--device", default="cpu", help="where the networks run: cpu (default) or cuda (float32)")
    oracle = sub.add_parser("oracle", help="per-task fine-tuning oracle vs classifier selection (issue 12)")
    oracle.add_argument("run_dir", type=Path)
    oracle.add_argument("--tasks", type=int, default=20, help="tasks, anchored at classes spread over the hierarchy")
    oracle.add_argument("--lr", type=float, nargs="+", default=None,
                        help="learning rates of the grid (default: lab.finetune_oracle.LEARNING_RATES)")
    oracle.add_argument("--epochs", type=int, default=None,
                        help="cosine over this many epochs, a snapshot after each "
                             "(default: lab.finetune_oracle.MAX_EPOCHS)")
    oracle.add_argument("--bn", default=None,
                        help="batch norm while fine-tuning: train (default; statistics follow the task) or frozen "
                             "(stage 1's)")
    oracle.add_argument("--out", type=Path, default=None, help="also write the result as JSON here")
    args = parser.parse_args(argv)
    try:
        if args.command == "bases":
            from .bases import evaluate_bases

            result = evaluate_bases(args.run_dir, seeds=args.seeds, task_mode=args.tasks,
                                    device=TrainDevice.parse(args.device).device)
        else:
            from trainer.rundir import RunDir

            from .finetune_oracle import FinetuneGrid, evaluate_oracle

            given = {"learning_rates": args.lr and tuple(args.lr), "max_epochs": args.epochs, "bn": args.bn}
            grid = FinetuneGrid(**{k: v for k, v in given.items() if v is not None})  # validates
            result = evaluate_oracle(args.run_dir, args.tasks, grid=grid)
            # The bench report picks up oracle.json; another grid does not replace it unless --out says so.
            default = RunDir(args.run_dir).oracle
            args.out = args.out or (default if grid == FinetuneGrid() else default.with_name("oracle_grid.json"))
        result["command"] = " ".join(["python -m lab", *(argv or sys.argv[1:])])
        result["run_command"] = run_command(args.run_dir)
        text = json.dumps(result, indent=1)
        print(text)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text + "\n")
    except (DataError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
