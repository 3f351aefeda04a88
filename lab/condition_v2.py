"""Field conditions, TAPER round 2 (issue 50): a run directory whose stage 1 is a finished `conditions` run's
baseline and whose stage-2 bases are the ceiling's per-condition networks (lab/condition_ceiling.py), for
the trainer to complete (the same-compute baseline and stage 3). Protocol and predictions:
docs/results/experiments.md, "TAPER over conditions, round 2, pre-registered".

Why the bases are put in place rather than trained again: they are what `train_stage2_basis` trains from
this stage 1 with `stage2_epochs` 18 (each condition's images, 2 epochs at stage 2's lr 0.01), already
trained and scored once by the ceiling experiment.

    python -m lab.condition_v2 --from-run /root/runs/conditions --ceiling /root/cond-ceiling \\
        --out /root/runs/conditions-v2
    python -m trainer run --out /root/runs/conditions-v2

At another width (`--ceiling` a lab/condition_width.py folder), stage 1 is that folder's (b), `generic.pt`,
and the baseline its same-compute network, `generic_same_compute.pt` (b + 18 epochs on all conditions at
lr 0.01: what the trainer's baseline would train from that stage 1, with its own mixture draws); the
`--from-run` run gives only the recipe and the class embeddings:

    python -m lab.condition_v2 --from-run /root/runs/conditions --ceiling /root/cond-w0125 --width 0.125 \\
        --out /root/runs/conditions-w0125
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import torch

from trainer.checkpoints import save_state
from trainer.config import TrainConfig
from trainer.rundir import RunDir

from .condition_ceiling import FINETUNE_LR

ROUND2 = {  # stage 3 as in the bench-narrow recipe (NARROW_SPECIALISTS): the routing prior, no weight trains
    "stage2_epochs": 18, "stage2_lr": FINETUNE_LR, "stage3_epochs": 0.01, "stage3_lr": 0.0,
    "stage3_mixer_init": "majority", "baseline_lr": FINETUNE_LR,
}


def build(from_run: Path, ceiling: Path, out: Path, width: float | None = None) -> Path:
    """The run directory `out`; `width`: the ceiling's networks are of this width (lab.condition_width)."""
    source, target = RunDir(from_run), RunDir(out)
    if target.config.exists():
        raise SystemExit(f"{out} exists: resume it with `python -m trainer run --out {out}`")
    config = TrainConfig.load(source.config)
    fields = json.loads(source.config.read_text())
    per_basis = ROUND2["stage2_epochs"] / config.num_bases
    fields.update(ROUND2, stage1_epochs=config.stage1_epochs + config.stage2_epochs + config.stage3_epochs)
    if width is not None:
        fields["width"] = width
    out.mkdir(parents=True)
    target.config.write_text(json.dumps(fields, indent=1) + "\n")
    shutil.copy2(source.classes, target.classes)
    target.model("stage1").parent.mkdir(parents=True)
    if width is None:
        shutil.copy2(source.model("baseline"), target.model("stage1"))
    else:
        save_state(target.model("stage1"), torch.load(ceiling / "generic.pt", weights_only=True),
                   {"source": f"{ceiling}/generic.pt"})
        save_state(target.model("baseline"), torch.load(ceiling / "generic_same_compute.pt", weights_only=True),
                   {"source": f"{ceiling}/generic_same_compute.pt"})
    for q, name in enumerate(config.conditions):
        state = torch.load(ceiling / f"oracle_{name}.pt", weights_only=True)
        save_state(target.basis(q), state, {"source": f"{ceiling}/oracle_{name}.pt", "epochs": str(per_basis)})
    if width is None:
        stage1 = f"{source.model('baseline')} (the baseline of {from_run})"
        baseline, script = "trained by the trainer", "condition_ceiling"
    else:
        stage1, baseline, script = f"{ceiling}/generic.pt", f"{ceiling}/generic_same_compute.pt", "condition_width"
    (out / "provenance.json").write_text(json.dumps({
        "stage1": stage1, "baseline": baseline, "stage2": f"{ceiling}/oracle_<condition>.pt (lab/{script}.py)",
        "changed": ROUND2}, indent=1) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.condition_v2", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from-run", type=Path, required=True, help="a finished `--preset conditions` run")
    parser.add_argument("--ceiling", type=Path, required=True, help="lab.condition_ceiling's --work folder")
    parser.add_argument("--out", type=Path, required=True, help="the new run directory")
    parser.add_argument("--width", type=float, default=None,
                        help="the width of a lab.condition_width ceiling (its (b) is stage 1, its same-compute "
                             "network the baseline)")
    args = parser.parse_args(argv)
    print(f"built {build(args.from_run, args.ceiling, args.out, args.width)}: complete it with "
          f"`python -m trainer run --out {args.out}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
