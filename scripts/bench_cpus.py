"""The fusion kernel and personalize() on each CPU the project's machines have shown: docs/results/cpus.json.

    python -m scripts.bench_cpus [--repeats 6] [--pairs 20] [--aarch64]

One row per CPU, keyed by its model name and vector features: a run on a new CPU adds its row, a run on a
CPU already there replaces that row only. Each row: `cpu` (model, cores), `features` (the integer and vector
features the kernels choose by), `l3`, `fuse_fold_over_roofline` (fp32 and the compact mode
`drop:0.04+subspace:8+fp16`, at full width and at the bench size; scripts/roofline.py: the fusion's bytes
moved over this machine's measured copy bandwidth, on the threads the fusion used), `personalize_ms` (fp32,
compact, int8 at full width 224 px: scripts/bench_int8.full_width_timing's medians of alternated pairs),
`kernel` (the C kernel's build this CPU runs), `builds` (fuse+fold at full width in each build this CPU
can run, in the layout a CPU of that build gets from onnxruntime: AVX-512 blocks of 16, AVX2 blocks of 8,
the baseline build plain: how the kernel would do on a CPU that lacks a feature, timed on this one),
`command` and `date`. With --aarch64, `aarch64` holds the cross-built kernel's parity under qemu and its
instructions per weight (scripts/cross_kernel.py).
Measure on a quiet machine: the row says nothing of what else ran.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import sdk
from export.compress import Mode, compress
from scripts import bench_bundle, bench_int8, bench_runtime, cpu, roofline
from scripts.results import write_result
from sdk.fusion.native import NativeKernel, available_builds, native_kernel, packed_placements
from sdk.fusion.plan import FusionPlan
from sdk.media.report_page import cpu_name

OUT = Path("docs/results/cpus.json")
# The layout onnxruntime's NCHWc transformer gives a CPU that runs each build (0: plain, no NCHWc).
BUILD_BLOCKS = {"avx512": 16, "avx2": 8, "baseline": 0}
COMPACT = "drop:0.04+subspace:8+fp16"
def fuse_fold(modes: list[str], repeats: int, tmp: Path, roof: roofline.Roofline) -> dict:
    """fuse+fold over its roofline and personalize() at the bench size and at full width, per mode."""
    out: dict[str, dict] = {"bench_size": {}, "full_width": {}}
    shape = bench_bundle.BENCH_SHAPE
    for name in modes:
        mode = Mode.parse(name)
        shared = bench_bundle.run_shared(mode, *shape[:3])
        path = bench_runtime.random_bundle(tmp / "bench.taper", *shape,
                                           store=lambda b, m=mode, s=shared: compress(b, m, s))
        out["bench_size"][name] = bench_bundle.timing(path, repeats, tmp, roof, class_lists=True)
        path.unlink()
    shared = {name: bench_bundle.run_shared(Mode.parse(name), "imagenet", 1.0, 1000) for name in modes}
    out["full_width"] = bench_bundle.full_width([Mode.parse(m) for m in modes], shared, repeats, tmp, roof)
    return out


def builds(modes: list[str], repeats: int, tmp: Path, roof: roofline.Roofline) -> dict:
    """Per mode at full width, per build this CPU can run: fuse+fold (median of `repeats` x 5, two threads
    where the engine would use two) in that build's layout, and over the roofline."""
    kernel = native_kernel()
    if kernel is None:
        return {}
    alpha = np.random.default_rng(0).dirichlet(np.ones(10), 4).astype(np.float32)
    out: dict[str, dict] = {}
    for name in modes:
        mode = Mode.parse(name)
        shared = bench_bundle.run_shared(mode, "imagenet", 1.0, 1000)
        path = bench_runtime.random_bundle(tmp / "full.taper", "imagenet", 1.0, 1000, 224, 10,
                                           store=lambda b, m=mode, s=shared: compress(b, m, s))
        bases = sdk.format.bundle.Bundle.open(path).bases
        out[name] = {}
        for build in available_builds(kernel._library):
            placements, floats = packed_placements(bases.shapes, BUILD_BLOCKS[build])
            plan = FusionPlan.build(bases, placements, floats, NativeKernel(kernel._library, build=build))
            buffer = plan.new_buffer(None)
            plan.fuse_and_fold(alpha, buffer)
            times = []
            for _ in range(5 * repeats):
                start = time.perf_counter()
                plan.fuse_and_fold(alpha, buffer)
                times.append((time.perf_counter() - start) * 1000)
            work, threads = roofline.plan_work(plan), plan.kernel.parts(plan)
            ms = statistics.median(times)
            out[name][build] = {"layout": f"blocked by {BUILD_BLOCKS[build]}" if BUILD_BLOCKS[build] else "plain",
                                "threads": threads, "fusion_ms": round(ms, 3),
                                "fuse_fold_over_roofline": roofline.over_roofline(ms, work, roof, threads)}
        path.unlink()
    return out


def measure(repeats: int, pairs: int) -> dict:
    roof = roofline.measure()
    with tempfile.TemporaryDirectory() as tmp:
        timings = fuse_fold(["fp32", COMPACT], repeats, Path(tmp), roof)
        by_build = builds(["fp32", COMPACT], repeats, Path(tmp), roof)
    int8 = bench_int8.full_width_timing(224, pairs, COMPACT)
    kernel = native_kernel()
    short = {"fp32": "fp32", COMPACT: "compact"}   # the table's names; `compact_mode` says which mode

    def per_size(key: str) -> dict:
        return {size: {short[mode]: row[key] for mode, row in rows.items()} for size, rows in timings.items()}

    return {
        "cpu": cpu_name(), "features": cpu.features(), "l3": cpu.l3_bytes(), "machine": platform.machine(),
        "kernel": kernel.variant if kernel else "numpy", "compact_mode": COMPACT,
        "roofline": roof.as_dict(),
        "fuse_fold_over_roofline": per_size("fuse_fold_over_roofline"),
        "fusion_ms": per_size("fusion_ms"),
        "builds": {short[mode]: rows for mode, rows in by_build.items()},
        "personalize_ms": {"fp32": timings["full_width"]["fp32"]["personalize_ms"],
                           "compact": timings["full_width"][COMPACT]["personalize_ms"],
                           "int8": int8["personalize_ms"]["int8"], "int8_route": int8["int8_route"],
                           "int8_steps": int8["int8_steps_ms"]},
        "command": "python -m scripts.bench_cpus " + " ".join(sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=6, help="rounds over the descriptions per timing")
    parser.add_argument("--pairs", type=int, default=20, help="alternated fp32/int8 pairs (full width)")
    parser.add_argument("--aarch64", action="store_true", help="also the cross-built aarch64 kernel (qemu)")
    parser.add_argument("--skip-timing", action="store_true", help="only --aarch64 (keeps every CPU row)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    table = json.loads(args.out.read_text()) if args.out.exists() else {"cpus": {}}
    if not args.skip_timing:
        print(f"[cpus] measuring {cpu.key()} ({os.cpu_count()} cores)", flush=True)
        table["cpus"][cpu.key()] = measure(args.repeats, args.pairs)
    if args.aarch64:
        from scripts import cross_kernel

        table["aarch64"] = {**cross_kernel.parity("aarch64", count=True),
                            "command": "python -m scripts.bench_cpus --aarch64 --skip-timing"}
    write_result(table, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
