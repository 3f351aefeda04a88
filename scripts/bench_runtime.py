"""Runtime benchmark: fusion bandwidth, personalize() cost, inference latency. Writes
docs/results/runtime.{json,md}. All ratios are against baselines measured in the same run.

    .venv/bin/python -m scripts.bench_runtime [--bench-bundle tiny-imagenet.taper] [--repeats 15]

Cases: (1) full-width ResNet-18 at 224 px, 1000 classes, Q=10, bases with RANDOM weights (timing only:
speed does not depend on the values); (2) the bench model (width 0.25, 64 px, Q=10) from a trained
bundle if --bench-bundle is given, else random weights of that shape.
Baselines: a plain copy of the same bases (bandwidth); an onnxruntime session for a plain ResNet-18
.onnx file with the same weights embedded (session creation, inference at full optimization).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

import sdk
from export.bundle import assemble, write_bundle
from scripts import cpu, roofline
from sdk.format.manifest import Architecture
from sdk.fusion.architecture import NUM_BLOCKS, block_layout, parameter_shapes
from sdk.fusion.bases import CompactBases
from sdk.fusion.mixer import tensor_shapes as mixer_tensor_shapes

INFERENCE_SECONDS = 2.0
DESCRIPTIONS = ["insects", "kitchen appliances", "a drinking glass with a base and stem", "dogs", "vehicles"]


def random_bundle(path: Path, stem: str, width: float, num_classes: int, size: int, q: int, store=None) -> Path:
    """A bundle of the given shape with random weights (for timing only); `store(bases)` may compress them."""
    rng = np.random.default_rng(0)
    shapes = parameter_shapes(stem, width, num_classes)
    bases = []
    for names in block_layout(shapes):
        parts = []
        for n in names:
            count = int(np.prod(shapes[n], dtype=np.int64))
            low, high = (0.5, 1.5) if n.endswith("running_var") else (-0.05, 0.05)
            parts.append(rng.uniform(low, high, (q, count)).astype(np.float32))
        bases.append(np.concatenate(parts, axis=1))
    dim, hidden = 384, 256
    layers = 4
    mixer = {}   # random linear weights, identity batch norms
    for name, shape in mixer_tensor_shapes(dim, hidden, layers, NUM_BLOCKS, q).items():
        ones = name.endswith("running_var") or (name.endswith(".weight") and len(shape) == 1)
        value = rng.normal(0, 0.05, shape) if len(shape) == 2 else np.full(shape, float(ones))
        mixer[name] = value.astype(np.float32)
    words = ["insect", "dog", "vehicle", "kitchen appliance", "drinking glass", "tree", "bicycle", "cat"]
    names = [f"{words[i % len(words)]} {i}" for i in range(num_classes)]
    # Real text embeddings of the class names, so descriptions resolve as they would on a real bundle.
    from export.text_encoder import cached_text_encoder
    from sdk.text.encoder import TextEncoder

    emb = TextEncoder.from_dir(cached_text_encoder()).embed_class_names(names)
    classes = {"classes": [{"id": f"c{i}", "name": n, "path": ["root", n]} for i, n in enumerate(names)],
               "supercategories": {}}
    compact = CompactBases.full(bases, shapes)
    compact = store(compact) if store is not None else compact
    manifest, members = assemble(Architecture(stem, width, num_classes, size), compact, mixer, hidden, NUM_BLOCKS, emb,
                                 classes, {"run": "random weights (timing only)", "licenses": {}}, layers)
    return write_bundle(path, manifest, members)


def plain_resnet_onnx(bundle: sdk.TaperBundle, alpha: np.ndarray, path: Path) -> Path:
    """A plain ResNet-18 .onnx with the same (fused) weights embedded and all classes (the baseline)."""
    import torch

    from export.personalized import PersonalizedNetwork

    weights = bundle.fused_weights(alpha)
    network = PersonalizedNetwork(bundle, alpha, weights["fc.weight"], weights["fc.bias"])
    size = bundle.preprocessing.input_size
    torch.onnx.export(network, (torch.zeros(1, 3, size, size),), str(path), dynamo=False, opset_version=17,
                      input_names=["image"], output_names=["logits"], dynamic_axes={"image": {0: "batch"}})
    return path


def median_ms(fn, repeats: int) -> float:
    return roofline.median_s(fn, repeats) * 1000


def fusion_bandwidth(bundle: sdk.TaperBundle, repeats: int, roof: roofline.Roofline) -> dict:
    """The plain GEMV per layer over the bundle's stored bases (only when every layer is `full`), and the
    route's fuse-and-fold, each against a copy of the same bytes; and fuse-and-fold against the machine's
    roofline (`scripts.roofline`)."""
    layers = bundle.bundle.bases.layers
    alpha = np.full((4, bundle.num_bases), 1 / bundle.num_bases, np.float32)
    arrays = [a for lb in layers for a in lb.parts.values()]
    copies = [np.empty_like(a) for a in arrays]
    for a in arrays:  # page the mapped file in once, so both measure memory, not disk
        a.sum(dtype=np.float64)
    copy_ms = median_ms(lambda: [np.copyto(c, a) for c, a in zip(copies, arrays, strict=True)], repeats)
    base_bytes = sum(a.nbytes for a in arrays)
    copy_bw = 2 * base_bytes / copy_ms / 1e6
    result = {"bases_mb": round(base_bytes / 1e6, 1), "copy_ms": round(copy_ms, 2), "copy_gb_s": round(copy_bw, 2)}
    if all(lb.kind == "full" and lb.storage.dtype == "float32" for lb in layers):
        rows = [lb.parts["weight"].reshape(bundle.num_bases, -1) for lb in layers]
        fused = [np.empty(r.shape[1], np.float32) for r in rows]
        fuse_ms = median_ms(lambda: [np.dot(alpha[0], r, out=f) for r, f in zip(rows, fused, strict=True)], repeats)
        fuse_bw = (sum(r.nbytes for r in rows) + sum(f.nbytes for f in fused)) / fuse_ms / 1e6
        result.update({"fuse_ms": round(fuse_ms, 2), "fusion_gb_s": round(fuse_bw, 2),
                       "fusion_bandwidth_ratio": round(fuse_bw / copy_bw, 3)})
    plan = bundle.engine.current.plan  # what personalize() does on the route: fusion with folding
    work = roofline.plan_work(plan)
    with bundle.engine.weight_buffer() as target:
        ms = median_ms(lambda: bundle.engine.fuse_and_fold(alpha, target), repeats)
    threads = fusion_threads(plan)
    result.update({"fuse_fold_ms": round(ms, 3), "fuse_fold_read_mb": round(work.bytes_read / 1e6, 2),
                   "fuse_fold_bandwidth_ratio": round((work.bytes_read + work.bytes_written) / ms / 1e6 / copy_bw, 3),
                   "fuse_fold_work": work.as_dict(), "fuse_fold_threads": threads,
                   "fuse_fold_roofline_ms": roof.ms(work, threads),
                   "fuse_fold_over_roofline": roofline.over_roofline(ms, work, roof, threads)})
    return result


def fusion_threads(plan) -> int:
    """The threads the plan's kernel fuses it with (the C kernel: one for a small plan, where a hand-off to
    the second core cost more than it saved, sdk/fusion/native.py; numpy: BLAS's, taken as every core)."""
    return plan.kernel.parts(plan) if hasattr(plan.kernel, "parts") else os.cpu_count() or 1


def pair_ratios(totals: list[float], baselines: list[float]) -> dict:
    """personalize() over the plain session timed right after it, per pair: median and spread."""
    ratios = sorted(t / b for t, b in zip(totals, baselines, strict=True))
    quartiles = statistics.quantiles(ratios, n=4)
    return {"pairs": len(ratios), "median": round(statistics.median(ratios), 3),
            "p25": round(quartiles[0], 3), "p75": round(quartiles[2], 3),
            "min": round(ratios[0], 3), "max": round(ratios[-1], 3)}


def peak_memory_mb(path: Path) -> dict:
    # VmHWM (peak resident memory) of a fresh process: unlike ru_maxrss it is not inherited across fork.
    code = f"""
import sdk
def hwm():
    return int([l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]) / 1024
b = sdk.load({str(path)!r}).warm_up()
before = hwm()
m = sdk.personalize(b, "insects")
print(before, hwm())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout.split()
    return {"peak_rss_after_load_mb": round(float(out[0]), 1), "peak_rss_after_personalize_mb": round(float(out[1]), 1)}


def personalize_times(bundle: sdk.TaperBundle, repeats: int, baseline=None, descriptions=DESCRIPTIONS
                      ) -> tuple[list[float], dict[str, list], list[float]]:
    """Personalize for each description `repeats` times, as an app that replaces its model (each model
    is dropped when the next is built). With `baseline` (a callable), it is timed after each
    personalization, so that drift on this noisy machine hits both sides of the ratio alike."""
    totals, parts, baseline_times = [], {}, []
    for _ in range(repeats):
        for d in descriptions:
            t = time.perf_counter()
            model = sdk.personalize(bundle, d)
            totals.append((time.perf_counter() - t) * 1000)
            for k, v in model.timings.items():
                parts.setdefault(k, []).append(v)
            del model
            if baseline is not None:
                t = time.perf_counter()
                baseline()
                baseline_times.append((time.perf_counter() - t) * 1000)
    return totals, parts, baseline_times


def run_case(name: str, path: Path, repeats: int, tmp: Path, roof: roofline.Roofline) -> dict:
    bundle = sdk.load(path)
    t = time.perf_counter()
    bundle.warm_up()  # once per bundle, as an app would at start: text encoder session, device compile
    warm_up_ms = (time.perf_counter() - t) * 1000
    result = {"case": name, "bundle_mb": round(path.stat().st_size / 1e6, 1), "route": bundle.engine.route,
              "warm_up_ms": round(warm_up_ms, 1), **fusion_bandwidth(bundle, repeats, roof)}
    model = sdk.personalize(bundle, DESCRIPTIONS[0])  # kept for the inference measurement
    plain = plain_resnet_onnx(bundle, model.alpha, tmp / f"{name}-plain.onnx")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Without spin-waiting threads, as the runtime's sessions: a spinning session keeps a core busy
    # after its work and so slows whatever runs next (here: the next personalization, or inference).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    ort.InferenceSession(str(plain), options, providers=["CPUExecutionProvider"])  # once, untimed (file cache)
    totals, parts, session_times = personalize_times(
        bundle, repeats, lambda: ort.InferenceSession(str(plain), options, providers=["CPUExecutionProvider"]))
    session_ms = statistics.median(session_times)
    standard = sdk.load(path, device_compile=False).warm_up()  # the same with onnxruntime's standard route
    standard_totals, _, _ = personalize_times(standard, max(1, repeats // 3))
    plain_session = ort.InferenceSession(str(plain), options, providers=["CPUExecutionProvider"])
    size = bundle.preprocessing.input_size
    image = np.random.default_rng(0).integers(0, 255, (1, size, size, 3), dtype=np.uint8)
    x = bundle.preprocessing.normalize(image)
    personal, baseline = [], []
    # Alternating blocks, so drift on a noisy machine hits both alike; at least `repeats` blocks and
    # INFERENCE_SECONDS per side (a 64-px inference takes 0.3 ms: 100 samples would span 30 ms).
    while len(personal) < 5 * repeats or sum(personal) < INFERENCE_SECONDS or sum(baseline) < INFERENCE_SECONDS:
        for _ in range(5):    # same normalised input for both: the personalized network (backbone + head rows)
            t = time.perf_counter()
            model.network.run(x)
            personal.append(time.perf_counter() - t)
        for _ in range(5):
            t = time.perf_counter()
            plain_session.run(None, {"image": x})
            baseline.append(time.perf_counter() - t)
    personalize_ms = statistics.median(totals)
    result.update({
        "personalize_ms": round(personalize_ms, 2),
        "personalize_ms_standard_route": round(statistics.median(standard_totals), 2),
        "personalize_breakdown_ms": {k: round(statistics.median(v), 3) for k, v in parts.items()},
        "plain_session_ms": round(session_ms, 2),
        "personalize_over_session_ratio": pair_ratios(totals, session_times)["median"],
        "personalize_over_session_pairs": pair_ratios(totals, session_times),
        "inference_ms": round(statistics.median(personal) * 1000, 3),
        "plain_inference_ms": round(statistics.median(baseline) * 1000, 3),
        "inference_ratio": round(statistics.median(personal) / statistics.median(baseline), 3),
        **peak_memory_mb(path),
    })
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench-bundle", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", type=Path, default=Path("docs/results/runtime"))
    args = parser.parse_args()
    cases = []
    roof = roofline.measure()
    print(f"roofline: {roof.as_dict()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        full = random_bundle(tmp / "full224.taper", "imagenet", 1.0, 1000, 224, 10)
        cases.append(run_case("resnet18_full_224px_q10", full, args.repeats, tmp, roof))
        print(json.dumps(cases[-1], indent=1), flush=True)
        small = args.bench_bundle or random_bundle(tmp / "bench64.taper", "imagenet", 0.25, 200, 64, 10)
        cases.append(run_case("bench_w025_64px_q10" + ("" if args.bench_bundle else "_random"), small,
                              args.repeats, tmp, roof))
        print(json.dumps(cases[-1], indent=1), flush=True)
    head = cases[0]
    result = {k: head[k] for k in ("fusion_bandwidth_ratio", "personalize_over_session_ratio", "inference_ratio",
                                   "personalize_ms")}
    result.update({"machine": f"{platform.machine()}, {ort.get_device()}, onnxruntime {ort.__version__}",
                   "cpu": cpu.describe(), "roofline": roof.as_dict(),
                   "command": "python -m scripts.bench_runtime " + " ".join(sys.argv[1:]), "cases": cases})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    previous = args.out.with_suffix(".json")
    if previous.exists() and "int8" in (kept := json.loads(previous.read_text())):
        result["int8"] = kept["int8"]   # written by scripts/bench_int8 --runtime-json (its own command inside)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    args.out.with_suffix(".md").write_text(markdown(result))
    print(f"wrote {args.out.with_suffix('.json')} and {args.out.with_suffix('.md')}")
    return 0


def markdown(result: dict) -> str:
    goals = {"fusion_bandwidth_ratio": ">= 0.9", "personalize_over_session_ratio": "<= 0.75",
             "inference_ratio": "<= 1.02", "fuse_fold_over_roofline": "<= 2.0"}
    roof = result["roofline"]
    lines = ["# Runtime benchmark", "", f"Command: `{result['command']}`  ", f"Machine: {result['machine']} "
             "(2 cores, noisy: medians, ratios against baselines measured in the same run).", "",
             f"Roofline of this machine, measured in the same run (`scripts/roofline.py`): copy {roof['copy_gb_s']} "
             f"GB/s, sgemm {roof['fma_gflops_1t']} G multiply-adds/s on one thread, {roof['fma_gflops_2t']} on two.",
             "", "| metric | " + " | ".join(c["case"] for c in result["cases"]) + " | goal |",
             "|---|" + "---|" * (len(result["cases"]) + 1)]
    keys = ["bundle_mb", "route", "warm_up_ms", "bases_mb", "fuse_ms", "copy_ms", "fusion_gb_s", "copy_gb_s",
            "fusion_bandwidth_ratio", "fuse_fold_ms", "fuse_fold_read_mb", "fuse_fold_bandwidth_ratio",
            "fuse_fold_roofline_ms", "fuse_fold_over_roofline", "personalize_ms", "personalize_ms_standard_route",
            "plain_session_ms", "personalize_over_session_ratio", "personalize_over_session_spread", "inference_ms",
            "plain_inference_ms", "inference_ratio", "peak_rss_after_load_mb", "peak_rss_after_personalize_mb"]
    cells = {k: [str(c.get(k, "")) for c in result["cases"]] for k in keys}
    for i, c in enumerate(result["cases"]):
        pairs = c["personalize_over_session_pairs"]
        cells["personalize_over_session_spread"][i] = f"{pairs['p25']}-{pairs['p75']} ({pairs['pairs']} pairs)"
    for k in keys:
        lines.append(f"| {k} | " + " | ".join(cells[k]) + f" | {goals.get(k, '')} |")
    lines += ["", "personalize() breakdown (ms, median):", ""]
    for c in result["cases"]:
        lines.append(f"- {c['case']}: " + ", ".join(f"{k} {v}" for k, v in c["personalize_breakdown_ms"].items()))
    lines += ["", "The full-width case uses random weights: timing only. `personalize_ms` excludes the one-time "
              "work of `warm_up()` (text encoder session, compiling the backbone for this CPU: `warm_up_ms`), "
              "which an app pays once per bundle. `personalize_ms_standard_route`: the same descriptions with "
              "`sdk.load(..., device_compile=False)` (every session optimized by onnxruntime from the plain "
              "graph). `plain_session_ms`: creating an onnxruntime session (full optimization) for a plain "
              "ResNet-18 .onnx with the same weights, timed right after each personalization; "
              "`personalize_over_session_ratio` is the median over these pairs of personalize() over the session "
              "timed after it, its spread the 25th-75th percentile. "
              "On the compiled route `warm_up()` also reorders the bases into the compiled graph's layout, "
              "so `fuse_fold` writes the conv weights where the shared session reads them, each output-channel "
              "block scaled by its batch norm in the same pass (so fusion and folding are one step in the "
              "breakdown), and `session` only hands the weights to the shared session (no session is created). "
              "`fusion_bandwidth_ratio` is the plain GEMV per layer over the bundle's "
              "bases (the issue's definition); `fuse_fold_bandwidth_ratio` is the same for the route's "
              "fusion with folding (bytes it reads and writes over its time). `fuse_fold_roofline_ms`: the least time "
              "that work can take here, (bytes read + written) / copy bandwidth + multiply-adds / the sgemm rate at "
              "the kernel's thread count (runtime.json has the counts, `fuse_fold_work`); "
              "`fuse_fold_over_roofline`: fuse_fold_ms over it. Below 1 means the data was partly in cache (the "
              "buffer is fused again in place; the L3 cache holds 32 MB) or the work reads more than it writes "
              "(reading alone streams faster than a copy, which the roofline charges for every byte). "
              "All sessions without spin-waiting threads (a spinning baseline slowed what ran after it).", "",
              "The ExecuTorch engine (`sdk.load(..., engine=\"executorch\")`) beside onnxruntime, personalize() "
              "and inference of both in one run: `engines.md` (`scripts/bench_engines.py`).", ""]
    if "int8" in result:
        q = result["int8"]
        targets = {"accuracy_drop": ">= -0.5", "worst_group_drop": ">= -1.5", "inference_over_fp32_session": "<= 0.5",
                   "personalize_ms": "<= 15", "personalize_over_fp32": "<= 2", "file_ratio": "<= 0.3"}
        lines += ["## int8 (`personalize(..., precision=\"int8\")`)", "",
                  f"`{q['command']}`; {q['cpu']}; timings {q['measured_at']} (full width: random weights, timing "
                  "only); accuracy on the demo run's tasks. Details: `int8_runtime.json`.", "",
                  "| figure | int8 | target |", "|---|---|---|"]
        lines += [f"| {k} | {q[k]} | {t} |" for k, t in targets.items()]
        lines += [f"| {k} (ExecuTorch .pte against the float32 .pte) | {q[k]} | |"
                  for k in ("executorch_inference_over_fp32", "executorch_file_ratio") if k in q]
        lines += ["", f"Calibration: {q['calibration']}. Session: {q['session_route']}.", ""]
        if q.get("other_cpus"):
            lines += ["The same full-width timings on other CPUs (`--full-width-only` runs; their files name the "
                      "command):", "", "| CPU | threads | size | int8 / fp32 inference (ms) | personalize int8 "
                      "(fp32) ms | results |", "|---|---|---|---|---|---|"]
            lines += [f"| {o['cpu']} | {o['threads']} | {size} | {r['inference_over_fp32_session']} "
                      f"({r['inference_ms_batch1']['int8']} / {r['inference_ms_batch1']['float32']}) | "
                      f"{r['personalize_ms']['int8']} ({r['personalize_ms']['float32']}) | `{o['results']}` |"
                      for o in q["other_cpus"] for size, r in o["full_width"].items()]
            lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
