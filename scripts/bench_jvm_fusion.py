"""Fusion on the JVM (android_demo/core) against a plain copy of the same bytes, beside the Python runtime's
fuse_fold on the same bundle. Writes docs/results/jvm_fusion.{json,md}.

    .venv/bin/python -m scripts.bench_jvm_fusion [--bench-bundle tiny-imagenet.taper] [--repeats 30]

Cases: the bench model from --bench-bundle (else random weights of its shape), and a full-width ResNet-18
(224 px, 1000 classes, Q=10) with RANDOM weights (timing only) stored as fp32, int8 and subspace:16+fp16.
For each bundle, one JVM (FusionBenchmark: medians over --repeats rounds after 5 untimed ones) times a plain
copy of the folded backbone's bytes into a direct buffer, the fast path on 1 thread and on every core, and
the reference loops (every fourth round); then this process times the Python runtime's fuse_fold (its C
kernel) on the same bundle, as personalize() reports it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import sdk
from export.compress import Mode, compress
from scripts import roofline
from scripts.bench_runtime import personalize_times, random_bundle
from scripts.java_fuzz import compile_core

FULL_WIDTH_MODES = ("fp32", "int8", "subspace:16+fp16")


def measure(name: str, path: Path, build: Path, repeats: int, roof: roofline.Roofline) -> dict:
    cores = len(os.sched_getaffinity(0))
    out = subprocess.run(["java", "-cp", str(build), "org.taper.sdk.FusionBenchmark", str(path), str(repeats),
                          str(cores)], check=True, capture_output=True, text=True, timeout=1800)
    row = json.loads(out.stdout)
    bundle = sdk.load(path)
    bundle.warm_up()
    _, parts, _ = personalize_times(bundle, max(3, repeats // 4))
    row["python_fuse_fold_ms"] = round(statistics.median(parts["fuse_fold"]), 3)
    row["python_route"] = bundle.engine.route
    row["bundle_mb"] = round(path.stat().st_size / 2**20, 1)
    row["fast_threads_over_copy"] = round(row["fast_threads_ms"] / row["copy_ms"], 2)
    row["fast_1thread_over_copy"] = round(row["fast_1thread_ms"] / row["copy_ms"], 2)
    row["reference_over_fast_1thread"] = round(row["reference_ms"] / row["fast_1thread_ms"], 1)
    row["fast_threads_over_python"] = round(row["fast_threads_ms"] / row["python_fuse_fold_ms"], 2)
    # The JVM fuses the convolutions into the plain layout, as the standard route's plan does: the same
    # reads, writes and arithmetic (scripts/roofline.py), at its thread count.
    work = roofline.plan_work(bundle.engine.standard.plan, convs_only=True)
    row["fuse_fold_work"] = work.as_dict()
    row["roofline_ms_threads"] = roof.ms(work, cores)
    row["fast_threads_over_roofline"] = roofline.over_roofline(row["fast_threads_ms"], work, roof, cores)
    row["fast_1thread_over_roofline"] = roofline.over_roofline(row["fast_1thread_ms"], work, roof, 1)
    print(f"[{name}] {json.dumps(row)}", flush=True)
    return {"case": name, **row}


def markdown(result: dict) -> str:
    lines = ["# Fusion on the JVM (android_demo/core)", "", f"Command: `{result['command']}`  ",
             f"Machine: {result['machine']}; {result['java']} (2 cores, noisy: medians of the same run).", "",
             "| case | output MB | copy ms | fast, 1 thread | fast, all cores | reference loops | "
             "fast (all cores) / copy | roofline ms | fast (all cores) / roofline | fast (1 thread) / its roofline | "
             "reference / fast (1 thread) | Python fuse_fold ms (route) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in result["cases"]:
        lines.append(f"| {c['case']} | {c['output_bytes'] / 2**20:.1f} | {c['copy_ms']} | {c['fast_1thread_ms']} | "
                     f"{c['fast_threads_ms']} ({c['threads']} threads) | {c['reference_ms']} | "
                     f"{c['fast_threads_over_copy']}x | {c.get('roofline_ms_threads', '')} | "
                     f"{c.get('fast_threads_over_roofline', '')} | {c.get('fast_1thread_over_roofline', '')} | "
                     f"{c['reference_over_fast_1thread']}x | "
                     f"{c['python_fuse_fold_ms']} ({c['python_route']}) |")
    lines += ["", "`copy`: a float[] of the folded backbone's size put into a direct buffer (what the core did "
              "after the reference loops). `fast`: `Fusion.foldInto` (fuse, fold, write into the engine's "
              "direct buffer, rows split over threads). `reference`: `Fusion.fuse` + `foldedBackbone`, the plain "
              "loops the tests compare the fast path with. Python: the runtime's `fuse_fold` (its C kernel) on "
              "the same bundle in this process. roofline: what the fused weights' reads, writes and arithmetic cost at "
              "this machine's copy bandwidth and sgemm rate, measured in the same run (scripts/roofline.py; "
              f"{result.get('roofline')}). Full-width bundles hold random weights: timing only. This is a "
              "desktop JVM (HotSpot C2, AVX2); a phone's ART compiles the same loops differently and was not "
              "measured.", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench-bundle", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--out", type=Path, default=Path("docs/results/jvm_fusion"))
    args = parser.parse_args()
    if shutil.which("javac") is None:
        raise SystemExit("needs a JDK (javac, java)")
    cases = []
    roof = roofline.measure()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        build = tmp / "classes"
        compile_core(build)
        small = args.bench_bundle or random_bundle(tmp / "bench64.taper", "imagenet", 0.25, 200, 64, 10)
        cases.append(measure("bench_w025_64px_q10" + ("" if args.bench_bundle else "_random"), small, build,
                             args.repeats, roof))
        for mode in FULL_WIDTH_MODES:
            parsed = Mode.parse(mode)
            path = random_bundle(tmp / "full.taper", "imagenet", 1.0, 1000, 224, 10,
                                 store=lambda b, m=parsed: compress(b, m))
            cases.append(measure(f"full_w1_224px_q10_random_{mode}", path, build, args.repeats, roof))
            path.unlink()
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    result = {"command": "python -m scripts.bench_jvm_fusion " + " ".join(sys.argv[1:]),
              "machine": f"{platform.machine()} {platform.processor() or ''}".strip(), "java": java,
              "roofline": roof.as_dict(), "cases": cases}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
