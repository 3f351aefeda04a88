"""Issue 75: is a longer upstream what the start lacks? The transfer benchmark's upstream trains stage 1 for
16 epochs (scripts/bench_transfer.py UPSTREAM_STAGE1_EPOCHS); this trains the same upstream (the `demo` preset,
Tiny ImageNet without the own photos' 24 classes) for more, stage 1 only, then fine-tunes the own photos from
its stage-1 network with the shipped defaults (trainer.config.FINETUNE) and scores it as the benchmark scores
its rows (classifier selection, the same 6-way tasks and val images).

    python -m lab.upstream_epochs --epochs 32 --out docs/results/transfer_upstream_e32.json   # 43 min here

Compare with the benchmark's row "init from the upstream's stage-1 network" (16 epochs: 77.54, experiments.md,
"Transfer") and its best from-scratch run (`scratch` in docs/results/transfer.json).
"""

from __future__ import annotations

import time

from scripts import bench_transfer as transfer


def main(argv: list[str] | None = None) -> int:
    parser = transfer.lab_parser("python -m lab.upstream_epochs", __doc__)
    parser.add_argument("--epochs", type=int, default=32, help="the upstream's stage-1 epochs")
    args = parser.parse_args(argv)

    from scripts.cpu import describe
    from scripts.own_photos import DATA
    from scripts.results import write_result

    start = time.perf_counter()
    work = transfer.work_folder(args.work)
    photos = transfer.own_photos(work)
    upstream = transfer.upstream_run(work, DATA, args.epochs, until="stage1")
    upstream_s = transfer.train_seconds(upstream, "stage1")
    init_dir, init_s = transfer.own_run(work, f"init-from-e{args.epochs}", photos, {"stage1_init": str(upstream)},
                                        until="stage1")
    row = transfer.Scorer(init_dir).network(init_dir)
    result = {"upstream_stage1_epochs": args.epochs, "upstream_stage1_s": round(upstream_s, 1),
              "init": transfer.summary(row), "init_train_s": round(init_s, 1),
              "wall_s": round(time.perf_counter() - start, 1), "cpu": describe(),
              "command": f"python -m lab.upstream_epochs --epochs {args.epochs}"}
    write_result(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
