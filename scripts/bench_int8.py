"""int8 personalized models on the device (issue 61): accuracy against float32 on the run's own tasks, what
personalize(precision="int8") costs, and inference time, in one run.

    python -m scripts.bench_int8 --bundle tiny-imagenet-demo.taper --run <its run dir> --out docs/results/int8_runtime

For each of the run's 20-way neighbourhood tasks (its first eval seed; `--tasks` caps them), the bundle is
personalized for the task's classes (an explicit class list: the mixer sees the same task in both) with
precision "float32" and "int8", and both models classify the task's val images. Reported: mean top-1 of
each and int8 minus float32, overall and by the super-category of the task's anchor (the worst group);
personalize times (medians, alternated); batch-1 inference times of one task's two models (medians of
alternated pairs); the CPU's integer features.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import sdk
from trainer.config import TrainConfig
from trainer.data.cache import load_dataset
from trainer.data.tasks import TaskSampler
from trainer.rundir import RunDir


def cpu_flags() -> list[str]:
    try:
        line = next(x for x in Path("/proc/cpuinfo").read_text().splitlines() if x.startswith("flags"))
    except (OSError, StopIteration):
        return []
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8", "amx_tile")
    return [f for f in wanted if f in line.split(":")[1].split()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench_int8", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--run", type=Path, required=True, help="the run the bundle was exported from")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--full-width", type=int, nargs="*", default=[], metavar="SIZE",
                        help="also time a random full-width bundle (imagenet stem, 200 classes, 10 bases) at these "
                        "image sizes (timing only: random weights say nothing of accuracy)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    config = TrainConfig.load(RunDir(args.run).config)
    data = load_dataset(config.data, config.input_size, progress=False)
    bundle = sdk.load(args.bundle).warm_up()
    names = [c.name for c in bundle.bundle.classes]
    if [c.id for c in bundle.bundle.classes] != list(data.wnids):
        raise SystemExit("the bundle's classes are not the run's data's (pass the run it was exported from)")
    sampler = TaskSampler(data.hierarchy, k=config.task_k)
    tasks = sampler.evaluation_tasks(config.eval_seeds[0])[: args.tasks]
    group_of = data.hierarchy.supercategory_of()
    groups = sorted(data.hierarchy.supercategories)
    labels = np.asarray(data.val.labels)
    rows, personalize_ms = [], {"float32": [], "int8": []}
    for task in tasks:
        classes = sorted(int(c) for c in task)
        keep = np.flatnonzero(np.isin(labels, classes))
        images = list(np.asarray(data.val.images[keep]))
        truth = [names[i] for i in labels[keep]]
        row = {"anchor_group": groups[group_of[int(task[0])]] if group_of[int(task[0])] >= 0 else "none"}
        for precision in ("float32", "int8"):
            t = time.perf_counter()
            model = sdk.personalize(bundle, [names[i] for i in classes], precision=precision)
            personalize_ms[precision].append((time.perf_counter() - t) * 1000)
            predicted = [label for label, _ in model.predict(images)]
            row[precision] = 100.0 * float(np.mean([p == y for p, y in zip(predicted, truth, strict=True)]))
        rows.append(row)
    drop = [r["int8"] - r["float32"] for r in rows]
    by_group: dict[str, list[float]] = {}
    for r, d in zip(rows, drop, strict=True):
        by_group.setdefault(r["anchor_group"], []).append(d)
    group_drop = {g: round(float(np.mean(v)), 2) for g, v in sorted(by_group.items())}
    # Inference: one task's two models, batch 1, alternated pairs.
    classes = sorted(int(c) for c in tasks[0])
    models = {p: sdk.personalize(bundle, [names[i] for i in classes], precision=p) for p in ("float32", "int8")}
    x = np.asarray(data.val.images[:1])
    for m in models.values():
        for _ in range(5):
            m.logits(list(x))
    times: dict[str, list[float]] = {"float32": [], "int8": []}
    for _ in range(args.pairs):
        for p, m in models.items():
            t = time.perf_counter()
            for _ in range(10):
                m.logits(list(x))
            times[p].append((time.perf_counter() - t) * 100)
    inference = {p: round(statistics.median(v), 3) for p, v in times.items()}
    sizes = export_sizes(models)
    med = {p: round(statistics.median(v), 2) for p, v in personalize_ms.items()}
    result = {
        "command": "python -m scripts.bench_int8 " + " ".join(argv or sys.argv[1:]),
        "bundle": args.bundle.name, "architecture": str(bundle.bundle.manifest.architecture),
        "tasks": len(rows), "task_k": config.task_k,
        "accuracy": {"float32": round(float(np.mean([r["float32"] for r in rows])), 2),
                     "int8": round(float(np.mean([r["int8"] for r in rows])), 2)},
        "int8": {"accuracy_drop": round(float(np.mean(drop)), 2), "worst_group_drop": min(group_drop.values()),
                 "personalize_ms": med["int8"], "personalize_over_fp32": round(med["int8"] / med["float32"], 2),
                 "inference_over_fp32_session": round(inference["int8"] / inference["float32"], 3),
                 "file_ratio": round(sizes["int8"] / sizes["float32"], 3),
                 "calibration": "none: ranges from the mixed batch norms (sdk.int8)"},
        "group_drop": group_drop, "personalize_ms": med, "inference_ms_batch1": inference, "onnx_bytes": sizes,
        "cpu": f"{platform.machine()}, integer features: {', '.join(cpu_flags()) or 'none found'}",
        "wall_s": round(time.perf_counter() - start, 1),
    }
    if args.full_width:
        pairs = max(5, args.pairs // 3)
        result["full_width"] = {f"{size}px": full_width_timing(size, pairs) for size in args.full_width}
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


def export_sizes(models: dict) -> dict[str, int]:
    """Bytes of each model's .onnx export (model.export)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return {p: m.export(Path(tmp) / f"{p}.onnx").stat().st_size for p, m in models.items()}


def full_width_timing(size: int, pairs: int) -> dict:
    """Personalize and batch-1 inference, float32 vs int8, on a random full-width bundle: medians of pairs."""
    import tempfile

    from scripts.bench_runtime import random_bundle

    with tempfile.TemporaryDirectory() as tmp:
        bundle = sdk.load(random_bundle(Path(tmp) / "wide.taper", "imagenet", 1.0, 200, size, 10)).warm_up()
        ms: dict[str, list[float]] = {"float32": [], "int8": []}
        models = {}
        for _ in range(pairs):
            for precision in ms:
                t = time.perf_counter()
                models[precision] = sdk.personalize(bundle, "insect 0, insect 8, dog 1", precision=precision)
                ms[precision].append((time.perf_counter() - t) * 1000)
        x = [np.zeros((size, size, 3), np.uint8)]
        run: dict[str, list[float]] = {"float32": [], "int8": []}
        for m in models.values():
            m.logits(x)
        for _ in range(pairs):
            for precision, m in models.items():
                t = time.perf_counter()
                m.logits(x)
                run[precision].append((time.perf_counter() - t) * 1000)
        p = {k: statistics.median(v) for k, v in ms.items()}
        r = {k: statistics.median(v) for k, v in run.items()}
        steps = models["int8"].timings
        sizes = export_sizes(models)
    return {"onnx_bytes": sizes, "file_ratio": round(sizes["int8"] / sizes["float32"], 3),
            "personalize_ms": {k: round(v, 1) for k, v in p.items()},
            "personalize_over_fp32": round(p["int8"] / p["float32"], 2), "int8_steps_ms": steps,
            "inference_ms_batch1": {k: round(v, 2) for k, v in r.items()},
            "inference_over_fp32_session": round(r["int8"] / r["float32"], 3), "pairs": pairs}


if __name__ == "__main__":
    raise SystemExit(main())
