"""Compact bundles: bytes, accuracy and personalize() time per storage mode. Writes
docs/results/bundle.{json,md,svg}.

    .venv/bin/python -m scripts.bench_bundle --run runs/bench [--modes fp32 int8 ...] [--repeats 10]

For each mode (export/compress.py), the run is exported (`python -m export bundle --mode`) and measured:
- bytes: the bundle file, and its bases over one fp32 ResNet-18 of the same width (every mixed tensor once);
- accuracy: the trainer's evaluation (paper protocol: the run's 20-way neighbourhood tasks, one anchored
  at each class, all val images of their classes, mean over the run's task seeds) of TAPER with the mode's
  bases as stored (dequantized), the mixer's alpha and classifier selection; and classifier selection (CS)
  alone on the same tasks: the baseline network if the run has one, else the stage-1 network;
- time, at the run's size: fuse+fold and personalize() (medians over descriptions and repeats), and the
  creation of a plain onnxruntime session for the same network timed right after each personalization.
Then a full-width ResNet-18 at 224 px with Q=10 RANDOM bases (timing only) stored in each mode, its
shared layers the ones the run's mode made shared (the measured sparsity), timed the same way.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

import sdk
from export.bundle import bundle_run
from export.compress import Mode, compress
from scripts import bench_runtime, cpu, roofline
from sdk.fusion.architecture import is_mixed, mixed_layers, parameter_shapes
from trainer.rundir import RunDir

# The bench model's shape (trainer preset `bench`): stem, width, classes, input size, bases.
BENCH_SHAPE = ("imagenet", 0.25, 200, 64, 10)
DEFAULT_MODES = ["fp32", "fp16", "delta+fp16", "int8", "int8+fp16", "lowrank:8", "lowrank:4+fp16",
                 "lowrank:2+fp16", "drop:0.05+int8+fp16"]


def single_fp32_bytes(shapes: dict) -> int:
    return 4 * sum(int(np.prod(s, dtype=np.int64)) for n, s in shapes.items() if is_mixed(n))


def evaluate(run_dir: Path, bases_by_mode: dict, seeds: list[int] | None) -> dict:
    """{"cs": accuracy, mode: accuracy}: mean over seeds of the paper protocol (see the module doc)."""
    import torch

    from trainer.config import TrainConfig
    from trainer.data.tasks import TaskSampler
    from trainer.evaluate import Evaluator
    from trainer.run import load_model, load_taper, make_context

    config = TrainConfig.load(RunDir(run_dir).config)
    ctx = make_context(run_dir, config, progress=False)
    evaluator = Evaluator(ctx.data, ctx.model_config, ctx.preprocessing, config.eval_images_per_class)
    model, embedder = load_taper(ctx, run_dir)
    cs_net = "baseline" if RunDir(run_dir).model("baseline").exists() else "stage1"
    cs_logits = evaluator.logits(load_model(ctx.model_config, RunDir(run_dir).model(cs_net)).state_dict())
    sampler = TaskSampler(ctx.data.hierarchy, k=config.task_k)
    bank = model.bank
    out: dict[str, list[float]] = {}
    for seed in seeds or config.eval_seeds:
        tasks = sampler.evaluation_tasks(seed)
        with torch.no_grad():
            alphas = model.alpha(embedder(tasks))
        out.setdefault("cs", []).append(evaluator.static(cs_logits, tasks)[0])
        for mode, rows in bases_by_mode.items():
            with torch.no_grad():
                for b, row in enumerate(rows):
                    p = bank.params(b).shape[1]
                    bank.params(b).copy_(torch.from_numpy(row[:, :p]))
                    bank.stats(b).copy_(torch.from_numpy(row[:, p:]))
            t = time.perf_counter()
            accuracy = evaluator.per_task(lambda i, task, a=alphas: bank.state_dict_for(a[i]), tasks)[0]
            out.setdefault(mode, []).append(accuracy)
            print(f"[eval] seed {seed} {mode}: {out[mode][-1]:.2f} ({time.perf_counter() - t:.0f} s)", flush=True)
    return {"cs_network": cs_net, **{k: float(np.mean(v)) for k, v in out.items()}}


def timing(path: Path, repeats: int, tmp: Path, roof: roofline.Roofline, class_lists: bool = False) -> dict:
    """fuse+fold and personalize() medians, fuse+fold against the machine's roofline, and a plain
    session's creation timed after each personalization (the ratio: median and spread over the pairs).
    class_lists: personalize for lists of 20 class names instead of the descriptions (a bundle with made-up
    class names, where "insects" would go through the text encoder as it does not on Tiny ImageNet)."""
    bundle = sdk.load(path).warm_up()
    descriptions = bench_runtime.DESCRIPTIONS
    try:
        for d in descriptions:
            sdk.personalize(bundle, d)
    except sdk.DescriptionError:  # not Tiny ImageNet (a test run): lists of its class names instead
        class_lists = True
    if class_lists:
        descriptions = [bundle.classes[i::5][:20] for i in range(5)]
    model = sdk.personalize(bundle, descriptions[0])
    plain = bench_runtime.plain_resnet_onnx(bundle, model.alpha, tmp / f"{path.stem}-plain.onnx")
    del model
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    ort.InferenceSession(str(plain), options, providers=["CPUExecutionProvider"])  # once, untimed (file cache)
    totals, parts, sessions = bench_runtime.personalize_times(
        bundle, repeats, lambda: ort.InferenceSession(str(plain), options, providers=["CPUExecutionProvider"]),
        descriptions)
    plan = bundle.engine.current.plan
    work, threads = roofline.plan_work(plan), bench_runtime.fusion_threads(plan)
    fusion_ms = statistics.median(parts["fuse_fold"])
    pairs = bench_runtime.pair_ratios(totals, sessions)
    return {"route": bundle.engine.route, "fusion_ms": round(fusion_ms, 3),
            "fuse_fold_read_mb": round(work.bytes_read / 1e6, 2), "fuse_fold_work": work.as_dict(),
            "fuse_fold_threads": threads, "fuse_fold_roofline_ms": roof.ms(work, threads),
            "fuse_fold_over_roofline": roofline.over_roofline(fusion_ms, work, roof, threads),
            "layers_fused": len(plan.layers), "layers_written_once": len(plan.constants) // 2,
            "personalize_ms": round(statistics.median(totals), 2),
            "plain_session_ms": round(statistics.median(sessions), 2),
            "personalize_over_session_ratio": pairs["median"], "personalize_over_session_pairs": pairs}


def full_width(modes: list[Mode], shared_by_mode: dict[str, set[str]], repeats: int, tmp: Path,
               roof: roofline.Roofline) -> dict:
    out = {}
    shapes = parameter_shapes("imagenet", 1.0, 1000)
    for mode in modes:
        path = bench_runtime.random_bundle(tmp / f"full-{mode}.taper", "imagenet", 1.0, 1000, 224, 10,
                                           store=lambda b, m=mode: compress(b, m, shared_by_mode[str(m)]))
        bases = sdk.format.bundle.Bundle.open(path).bases
        row = {"bundle_bytes": path.stat().st_size, "bases_bytes": bases.nbytes,
               "bases_over_single_fp32": round(bases.nbytes / single_fp32_bytes(shapes), 3),
               **timing(path, repeats, tmp, roof)}
        out[str(mode)] = row
        print(f"[full width] {mode}: {json.dumps(row)}", flush=True)
        path.unlink()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, default=None, help="a finished training run (stage 3 done)")
    parser.add_argument("--modes", nargs="+", default=DEFAULT_MODES)
    parser.add_argument("--full-width-modes", nargs="*", default=None, help="default: every mode")
    parser.add_argument("--seeds", type=int, nargs="*", default=None, help="task seeds (default: the run's)")
    parser.add_argument("--repeats", type=int, default=6, help="rounds over the descriptions per timing")
    parser.add_argument("--out", type=Path, default=Path("docs/results/bundle"))
    parser.add_argument("--timing-only", action="store_true",
                        help="time again the modes of the results at --out, without the run: random bases of the "
                             "bench shape stored in each mode, with the shared layers the run measured "
                             "(RUN_SHARED); bytes and accuracy stay as the run measured them")
    args = parser.parse_args()
    if args.timing_only:
        return retime(args.out, args.repeats)
    if args.run is None:
        parser.error("--run is required (or --timing-only)")
    modes = [Mode.parse(m) for m in args.modes]
    if str(modes[0]) != "fp32":
        modes.insert(0, Mode.parse("fp32"))
    roof = roofline.measure()
    rows, bases_rows, shared = {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for mode in modes:
            path = bundle_run(args.run, tmp / f"{mode}.taper", mode=mode)
            bases = sdk.format.bundle.Bundle.open(path).bases
            single = single_fp32_bytes(bases.shapes)
            bases_rows[str(mode)] = bases.block_rows()
            shared[str(mode)] = {lb.layer.name for lb in bases.layers if lb.kind == "shared"}
            rows[str(mode)] = {"bundle_bytes": path.stat().st_size, "bases_bytes": bases.nbytes,
                               "bases_over_single_fp32": round(bases.nbytes / single, 3),
                               "shared_layers": len(shared[str(mode)]), "layers": len(bases.layers),
                               **timing(path, args.repeats, tmp, roof)}
            print(f"[bench] {mode}: {json.dumps(rows[str(mode)])}", flush=True)
            path.unlink()
        accuracy = evaluate(args.run, bases_rows, args.seeds)
        for name, row in rows.items():
            row["accuracy"] = round(accuracy[name], 2)
            row["taper_minus_cs"] = round(accuracy[name] - accuracy["cs"], 2)
            row["minus_fp32"] = round(accuracy[name] - accuracy["fp32"], 2)
        chosen = [m for m in modes if args.full_width_modes is None or str(m) in args.full_width_modes]
        wide = full_width(chosen, shared, args.repeats, tmp, roof)
    result = {"command": "python -m scripts.bench_bundle " + " ".join(sys.argv[1:]),
              "machine": f"{platform.machine()}, {ort.get_device()}, onnxruntime {ort.__version__}",
              "cpu": cpu.describe(), "roofline": roof.as_dict(), "run": args.run.name,
              "classifier_selection": round(accuracy["cs"], 2),
              "cs_network": accuracy["cs_network"],
              "modes": rows, "full_width": wide}
    write(result, args.out)
    return 0


# The layers each drop threshold made shared on run bench-nb (docs/results/bundle.md: drop:0.04 shared 17
# of 21 layers, every one but the four 3x3 convs of layer4), so that --timing-only can store random bases
# alike. `retime` checks it: the random bases must take the run's bytes, which depend on what is shared.
RUN_SHARED = {0.04: {"layer4.0.conv1", "layer4.0.conv2", "layer4.1.conv1", "layer4.1.conv2"}}


def run_shared(mode: Mode, stem: str, width: float, num_classes: int) -> set[str]:
    if not mode.drop:
        return set()
    if mode.drop not in RUN_SHARED:
        raise SystemExit(f"{mode}: which layers drop:{mode.drop:g} made shared on the run is not recorded "
                         "(RUN_SHARED): measure it with --run")
    names = {lb.name for lb in mixed_layers(parameter_shapes(stem, width, num_classes))}
    return names - RUN_SHARED[mode.drop]


def retime(out: Path, repeats: int) -> int:
    """--timing-only: the timing columns of `out`.json measured again (see the flag's help)."""
    result = json.loads(out.with_suffix(".json").read_text())
    roof = roofline.measure()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, row in result["modes"].items():
            mode = Mode.parse(name)
            path = bench_runtime.random_bundle(tmp / "bench.taper", *BENCH_SHAPE,
                                               store=lambda b, m=mode: compress(b, m, run_shared(m, *BENCH_SHAPE[:3])))
            bases = sdk.format.bundle.Bundle.open(path).bases
            if bases.nbytes != row["bases_bytes"]:
                raise SystemExit(f"{name}: random bases take {bases.nbytes} bytes, the run's {row['bases_bytes']}: "
                                 "the shared layers differ from the run's")
            row.update(timing(path, repeats, tmp, roof, class_lists=True))
            print(f"[bench] {name}: {json.dumps(row)}", flush=True)
            path.unlink()
        modes = [Mode.parse(m) for m in result["full_width"]]
        shared = {str(m): run_shared(m, "imagenet", 1.0, 1000) for m in modes}
        result["full_width"] = full_width(modes, shared, repeats, tmp, roof)
    # The timings are this CPU's now (accuracy and bytes stay the run's): docs/results/cpus.json keeps a row per CPU.
    result.update({"roofline": roof.as_dict(), "timing_cpu": cpu.describe(),
                   "timing_command": "python -m scripts.bench_bundle " + " ".join(sys.argv[1:])})
    write(result, out)
    return 0


def write(result: dict, out: Path) -> None:
    previous = out.with_suffix(".json")
    if "int8" not in result and previous.exists() and "int8" in (kept := json.loads(previous.read_text())):
        result["int8"] = kept["int8"]   # written by scripts/bench_int8 --bundle-json (its own command inside)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    out.with_suffix(".svg").write_text(svg(result["modes"]))
    out.with_suffix(".md").write_text(markdown(result, out.with_suffix(".svg").name))
    print(f"wrote {out.with_suffix('.md')}, .json and .svg")


def svg(rows: dict) -> str:
    """Accuracy against bundle bytes, one labelled point per mode."""
    w, h, pad = 640, 400, 60
    xs = [r["bundle_bytes"] / 1e6 for r in rows.values()]
    ys = [r["accuracy"] for r in rows.values()]
    x0, x1 = 0, max(xs) * 1.1
    y0, y1 = min(ys) - 1, max(ys) + 1
    px = [pad + (x - x0) / (x1 - x0) * (w - 2 * pad) for x in xs]
    py = [h - pad - (y - y0) / (y1 - y0) * (h - 2 * pad) for y in ys]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
             'font-size="11">',
             f'<text x="{pad}" y="20" font-size="13" font-weight="bold">Personalized accuracy vs bundle size</text>',
             f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
             f'<text x="{w / 2}" y="{h - 20}" text-anchor="middle">bundle MB ({x0:.0f} to {x1:.1f})</text>',
             f'<text x="15" y="{h / 2}" transform="rotate(-90 15 {h / 2})" text-anchor="middle">'
             f'top-1 % ({y0:.1f} to {y1:.1f})</text>']
    for name, x, y, r in zip(rows, px, py, rows.values(), strict=True):
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="#1f77b4"/>')
        parts.append(f'<text x="{x + 6:.1f}" y="{y - 6:.1f}">{name} ({r["accuracy"]:.2f})</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def _ratio(r: dict) -> str:
    pairs = r.get("personalize_over_session_pairs")
    return f"{pairs['median']} [{pairs['p25']}-{pairs['p75']}]" if pairs else str(r["personalize_over_session_ratio"])


def _timing_cells(r: dict) -> str:
    return (f"{r['fusion_ms']} | {r['fuse_fold_read_mb']} | {r.get('fuse_fold_roofline_ms', '')} | "
            f"{r.get('fuse_fold_over_roofline', '')} | {r['personalize_ms']} | {r['plain_session_ms']} | {_ratio(r)} |")


def markdown(result: dict, plot: str) -> str:
    timing_head = "fuse+fold ms | read MB | roofline ms | over roofline | personalize ms | plain session ms | ratio |"
    lines = ["# Compact bundles: bytes, accuracy and personalize() time per storage mode", "",
             f"Command: `{result['command']}`  "]
    if "timing_command" in result:
        lines.append(f"Timing columns and the full-width table measured again by `{result['timing_command']}` (random "
                     "bases of the bench shape stored in each mode, with the run's shared layers: same bytes, so the "
                     "same work; personalized for lists of 20 class names, which like the run's group names need no "
                     "text encoder; bytes and accuracy as the run measured them)  ")
    lines += [f"Machine: {result['machine']} (2 cores, noisy: medians, ratios against a plain onnxruntime session "
              "created in the same run).", ""]
    if "roofline" in result:
        roof = result["roofline"]
        lines += [f"Roofline of this machine, measured in the same run (`scripts/roofline.py`): copy "
                  f"{roof['copy_gb_s']} GB/s, sgemm {roof['fma_gflops_1t']} G multiply-adds/s on one thread, "
                  f"{roof['fma_gflops_2t']} on two.", ""]
    lines += [f"Run `{result['run']}`. Classifier selection ({result['cs_network']} network): "
              f"{result['classifier_selection']}.", "",
              "| mode | bundle MB | bases / one fp32 ResNet-18 | shared layers | accuracy | minus fp32 | TAPER - CS | "
              + timing_head, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in result["modes"].items():
        lines.append(f"| {name} | {r['bundle_bytes'] / 1e6:.1f} | {r['bases_over_single_fp32']} | {r['shared_layers']}/"
                     f"{r['layers']} | {r['accuracy']:.2f} | {r['minus_fp32']:+.2f} | {r['taper_minus_cs']:+.2f} | "
                     + _timing_cells(r))
    lines += ["", f"![accuracy vs bytes]({plot})", "",
              "## Full width (ResNet-18, 224 px, 1000 classes, Q=10; RANDOM bases: timing only)", "",
              "Each mode's shared layers are the ones it made shared on the run above (same layer names).", "",
              "| mode | bundle MB | bases / one fp32 ResNet-18 | layers fused | " + timing_head,
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in result["full_width"].items():
        lines.append(f"| {name} | {r['bundle_bytes'] / 1e6:.1f} | {r['bases_over_single_fp32']} | "
                     f"{r['layers_fused']} | " + _timing_cells(r))
    lines += ["", "accuracy: TAPER on the paper protocol with the mode's bases as stored; minus fp32: against the "
              "plain bases of the same run. ratio: personalize() over the creation of a plain onnxruntime session "
              "(full optimization) of the same network timed right after it, the median over the pairs [25th-75th "
              "percentile]. read MB: what one fuse+fold reads (W_0, deltas, factors, channel tensors of the layers it "
              "fuses). roofline ms: the least time that reading, writing the fused weights and the arithmetic can "
              "take here ((bytes read + written) / copy bandwidth + multiply-adds / the sgemm rate at the thread "
              "count the kernel fuses the plan with, `fuse_fold_threads` in bundle.json: one where the plan moves "
              "under 8 MB, as every bench-size mode but fp32 (a hand-off to the second core cost more than it "
              "saved: sdk/fusion/native.py); `scripts/roofline.py` counts them, bundle.json has the counts); over "
              "roofline: fuse+fold ms over it.", ""]
    if "int8" in result:
        lines += int8_lines(result["int8"]) + [""]
    return "\n".join(lines)


def int8_lines(q: dict) -> list[str]:
    """bundle.md's int8 table: personalize(precision="int8") per storage mode at full width (bench_int8)."""
    lines = ["", "## int8 per storage mode (full width, random bases: timing only)", "",
             f"Command: `{q['command']}`; CPU: {q['cpu']}. Accuracy (the demo run's 600 tasks): int8 minus float32 "
             f"{q['accuracy_drop']:+.2f}, worst task group {q['worst_group_drop']:+.2f}. Medians of alternated pairs; "
             "inference batch 1 against the float32 session; .pte: the ExecuTorch exports (XNNPACK), where measured; "
             ".pte load: loading the program, which packs its weights (what a personalize that wrote them into a "
             "lowered program would pay instead of the session).",
             "", "| size, mode | personalize fp32 ms | int8 ms | over fp32 | quantize ms | session ms | "
             "inference over fp32 | .onnx over fp32 | .pte inference over fp32 | .pte over fp32 | .pte load ms "
             "(fp32 / int8) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, r in q["modes"].items():
        pte = r.get("executorch")
        lines.append(f"| {key} | {r['personalize_ms']['float32']} | {r['personalize_ms']['int8']} | "
                     f"{r['personalize_over_fp32']} | {r['int8_steps_ms'].get('quantize', '')} | "
                     f"{r['int8_steps_ms'].get('session', '')} | {r['inference_over_fp32_session']} | "
                     f"{r['file_ratio']} | {pte['inference_over_fp32'] if pte else '-'} | "
                     f"{pte['file_ratio'] if pte else '-'} | "
                     f"{'{float32} / {int8}'.format(**pte['load_ms']) if pte and 'load_ms' in pte else '-'} |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
