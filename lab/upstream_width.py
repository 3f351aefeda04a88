"""Issue 75: is a wider network what the start lacks? The transfer benchmark trains everything at the `demo`
preset's width 0.25. This trains the same upstream (Tiny ImageNet without the own photos' 24 classes, stage 1 for
UPSTREAM_STAGE1_EPOCHS epochs) at width 0.5, then the own photos at width 0.5 three ways: fine-tuned from its
stage-1 network (the shipped FINETUNE defaults), and from scratch for 32 stage-1 epochs (the best length of the
benchmark's width-0.25 sweep) and for 17 (as many as the fine-tune's head and body epochs). Each is scored as the
benchmark scores its rows: classifier selection on the same 6-way tasks and val images.

    python -m lab.upstream_width --out docs/results/transfer_width05.json    # ~45 min for the upstream here

Compare with the width-0.25 rows: the 16-epoch upstream's stage 1, 77.54 (experiments.md, "Transfer: does a
longer upstream make a better start?"), and the benchmark's from-scratch runs (docs/results/transfer.json).
"""

from __future__ import annotations

import time

from scripts import bench_transfer as transfer

WIDTH = 0.5
SCRATCH_EPOCHS = (32, 17)


def main(argv: list[str] | None = None) -> int:
    parser = transfer.lab_parser("python -m lab.upstream_width", __doc__)
    args = parser.parse_args(argv)

    from scripts.cpu import describe
    from scripts.results import write_result

    start = time.perf_counter()
    work = transfer.work_folder(args.work)
    photos = transfer.own_photos(work)
    up = transfer.upstream_run(work, until="stage1", extra={"width": WIDTH}, name="upstream-w05")
    up_s = transfer.train_seconds(up, "stage1")
    runs = {"init": transfer.own_run(work, "init-w05", photos, {"stage1_init": str(up), "width": WIDTH},
                                     until="stage1")}
    for epochs in SCRATCH_EPOCHS:
        runs[f"scratch_{epochs}"] = transfer.own_run(work, f"scratch-w05-{epochs}", photos,
                                            {"stage1_epochs": epochs, "width": WIDTH}, until="stage1")
    scorer = transfer.Scorer(runs["init"][0])
    rows = {}
    for name, (run_dir, seconds) in runs.items():
        rows[name] = {**transfer.summary(scorer.network(run_dir)), "train_s": round(seconds, 1)}
    best = max((f"scratch_{e}" for e in SCRATCH_EPOCHS), key=lambda k: rows[k]["accuracy"])
    result = {"width": WIDTH, "upstream_stage1_s": round(up_s, 1), **rows, "scratch_best": best,
              "init_gain_over_scratch": round(rows["init"]["accuracy"] - rows[best]["accuracy"], 2),
              "wall_s": round(time.perf_counter() - start, 1), "cpu": describe(),
              "command": "python -m lab.upstream_width"}
    write_result(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
