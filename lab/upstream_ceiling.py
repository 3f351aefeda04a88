"""Issue 75: how much can any start made from Tiny ImageNet lift the own photos? The transfer benchmark's upstream
leaves out the own photos' 24 classes, as the issue asks. This trains the same upstream (the `demo` preset, stage 1
for UPSTREAM_STAGE1_EPOCHS epochs) on all 200 classes, so that it has seen the own classes, with all 500 training
photos of each (the own photos are the first 150 of them; the val images stay Tiny ImageNet's val images, which no
run trains on). Two rows, scored as the benchmark scores its rows (classifier selection on the same 6-way tasks and
val images):

- `seen_upstream`: the upstream's own network and classifier, its columns for the own 24 classes (no own run);
- `init_from_seen`: the own photos fine-tuned from its stage-1 network with the shipped defaults
  (trainer.config.FINETUNE), as the row "init from the upstream's stage-1 network" (77.54) was.

Neither is a fair start (both saw the classes they are scored on); they bound what a Tiny ImageNet upstream of this
width and length can give, against the target `scratch` + 15 (docs/results/transfer.json).

    python -m lab.upstream_ceiling --out docs/results/transfer_ceiling.json     # ~45 min for the upstream here
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from scripts import bench_transfer as transfer
from scripts.cpu import describe
from scripts.results import write_result

NAME = "upstream-all"


def seen_upstream(scorer, upstream: Path) -> tuple[dict, int]:
    """The upstream's network scored on the own val images through its own classifier's columns of the own classes,
    and how many classes it trained on."""
    from scripts.own_photos import HERE
    from trainer.config import TrainConfig
    from trainer.evaluate import Evaluator
    from trainer.run import RunDir, load_model, make_context

    ctx = make_context(upstream, TrainConfig.load(upstream / "config.json"), progress=False)
    wnid_of = json.loads((HERE / "source_classes.json").read_text())["classes"]
    columns = [list(ctx.data.wnids).index(wnid_of[folder]) for folder in scorer.ctx.data.wnids]
    model = load_model(ctx.model_config, RunDir(upstream).reference_model())
    logits = Evaluator(scorer.ctx.data, ctx.model_config, scorer.ctx.preprocessing).logits(model.state_dict())
    return transfer.summary(scorer.static(np.asarray(logits)[:, columns])), len(ctx.data.wnids)


def main(argv: list[str] | None = None) -> int:
    args = transfer.lab_parser("python -m lab.upstream_ceiling", __doc__).parse_args(argv)
    start = time.perf_counter()
    work = transfer.work_folder(args.work)
    upstream = transfer.upstream_run(work, until="stage1", name=NAME, exclude=False)
    init_dir, init_s = transfer.own_run(work, "init-from-all", transfer.own_photos(work),
                                        {"stage1_init": str(upstream)}, until="stage1")
    scorer = transfer.Scorer(init_dir)
    seen, classes = seen_upstream(scorer, upstream)
    result = {"upstream_classes": classes, "upstream_stage1_epochs": transfer.UPSTREAM_STAGE1_EPOCHS,
              "upstream_stage1_s": round(transfer.train_seconds(upstream, "stage1"), 1), "seen_upstream": seen,
              "init_from_seen": {**transfer.summary(scorer.network(init_dir)), "train_s": round(init_s, 1)},
              "wall_s": round(time.perf_counter() - start, 1), "cpu": describe(),
              "command": "python -m lab.upstream_ceiling --out docs/results/transfer_ceiling.json"}
    write_result(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
