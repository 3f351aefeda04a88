"""int8 personalized models on the device (issue 61): accuracy against float32 on the run's own tasks, what
personalize(precision="int8") costs, and inference time, in one run.

    python -m scripts.bench_int8 --bundle tiny-imagenet-demo.taper --run <its run dir> --out docs/results/int8_runtime

For each of the run's 20-way neighbourhood tasks (`--tasks` of each of `--seeds`' task sets), the bundle is
personalized for the task's classes (an explicit class list: the mixer sees the same task in both) with
precision "float32" and "int8", and both models classify the task's val images. Reported: mean top-1 of
each and int8 minus float32, overall and by the super-category of the task's anchor (the worst group);
personalize times (medians, alternated); batch-1 inference times of one task's two models (medians of
alternated pairs); the CPU's integer features. With `--full-width`, the same timings on random full-width
bundles in each of `--full-width-modes`, and what each way of making the int8 session costs
(`session_routes`); the summary (`int8`) takes them from 224 px in the first mode. `--executorch` adds the
.pte exports' inference (float32 against XNNPACK's int8 kernels) at the bench size and in the first mode.
`--runtime-json` also writes that summary into runtime.json (its `int8` section) and regenerates runtime.md;
`--bundle-json` writes the full-width figures per storage mode into bundle.json (its `int8` section) and
regenerates bundle.md; `--results F` measures nothing and writes those sections from an earlier results file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import sdk
from scripts import cpu
from trainer.config import TrainConfig
from trainer.data.cache import load_dataset
from trainer.data.tasks import TaskSampler
from trainer.rundir import RunDir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.bench_int8", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, default=None)
    parser.add_argument("--run", type=Path, default=None, help="the run the bundle was exported from")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                        help="task-set seeds (the sampler's evaluation tasks of each; the demo run evaluated seed 0)")
    parser.add_argument("--full-width", type=int, nargs="*", default=[], metavar="SIZE",
                        help="also time a random full-width bundle (imagenet stem, 200 classes, 10 bases) at these "
                        "image sizes (timing only: random weights say nothing of accuracy)")
    parser.add_argument("--full-width-modes", nargs="+", default=[RECOMMENDED_MODE, "fp32"],
                        help="how the full-width bundle's bases are stored (the first is the summary's)")
    parser.add_argument("--runtime-json", type=Path, default=None,
                        help="also write the summary as the `int8` section of this runtime.json")
    parser.add_argument("--executorch", action="store_true",
                        help="also time each model's .pte export (XNNPACK), at the bench size and at full width "
                        "in the first of --full-width-modes")
    parser.add_argument("--bundle-json", type=Path, default=None,
                        help="also write the per-storage-mode figures as the `int8` section of this bundle.json "
                        "(scripts/bench_bundle's results) and regenerate bundle.md")
    parser.add_argument("--threads", type=int, default=None,
                        help="onnxruntime's intra-op threads for every full-width session (default: its own, one a "
                        "physical core); the CPU provider alone")
    parser.add_argument("--full-width-only", action="store_true",
                        help="only the --full-width timings (no bundle, run or data needed): how a CPU with other "
                        "integer features times the same random bundles, e.g. the lent GPU machine's "
                        "(scripts/device_int8_cpu.sh)")
    parser.add_argument("--other-cpu", type=Path, nargs="+", default=[],
                        help="results files of --full-width-only runs on other CPUs, summarised beside this one's in "
                        "the --runtime-json section (`int8.other_cpus`)")
    parser.add_argument("--results", type=Path, default=None,
                        help="measure nothing: write the --runtime-json / --bundle-json sections from this earlier "
                        "run's results file (its own command recorded in them)")
    args = parser.parse_args(argv)
    if args.results:
        write_sections(json.loads(args.results.read_text()), args.runtime_json, args.bundle_json, args.other_cpu)
        return 0
    if args.full_width_only:
        if not args.full_width:
            parser.error("--full-width-only needs --full-width SIZE ...")
        return write_result(time.perf_counter(), {
            "command": "python -m scripts.bench_int8 " + " ".join(argv or sys.argv[1:]),
            "cpu": cpu_description(), "threads": args.threads or "onnxruntime's default",
            "full_width": full_widths(args)}, args.out)
    if args.bundle is None or args.run is None:
        parser.error("--bundle and --run are required (or --results, or --full-width-only)")
    start = time.perf_counter()
    config = TrainConfig.load(RunDir(args.run).config)
    data = load_dataset(config.data, config.input_size, progress=False)
    bundle = sdk.load(args.bundle).warm_up()
    names = [c.name for c in bundle.bundle.classes]
    if [c.id for c in bundle.bundle.classes] != list(data.wnids):
        raise SystemExit("the bundle's classes are not the run's data's (pass the run it was exported from)")
    sampler = TaskSampler(data.hierarchy, k=config.task_k)
    seeds = list(args.seeds)
    tasks = [t for seed in seeds for t in sampler.evaluation_tasks(seed)[: args.tasks]]
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
            model = None   # the model before is released here, not inside the timing of the next one
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
    # Inference at the bench size: one task's two models, batch 1, alternated pairs.
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
    executorch = executorch_timing(models, config.input_size, args.pairs) if args.executorch else None
    med = {p: round(statistics.median(v), 2) for p, v in personalize_ms.items()}
    result = {
        "command": "python -m scripts.bench_int8 " + " ".join(argv or sys.argv[1:]),
        "bundle": args.bundle.name, "architecture": str(bundle.bundle.manifest.architecture),
        "tasks": len(rows), "seeds": seeds, "task_k": config.task_k,
        "accuracy": {"float32": round(float(np.mean([r["float32"] for r in rows])), 2),
                     "int8": round(float(np.mean([r["int8"] for r in rows])), 2)},
        "group_drop": group_drop, "bench_size": {
            "personalize_ms": med, "personalize_over_fp32": round(med["int8"] / med["float32"], 2),
            "inference_ms_batch1": inference,
            "inference_over_fp32_session": round(inference["int8"] / inference["float32"], 3),
            "onnx_bytes": sizes, "file_ratio": round(sizes["int8"] / sizes["float32"], 3),
            **({"executorch": executorch} if executorch else {})},
        "cpu": cpu_description(),
    }
    if args.full_width:
        result["full_width"] = full_widths(args)
    result["int8"] = summary(result, args.full_width, args.full_width_modes, drop)
    write_result(start, result, args.out)
    write_sections(result, args.runtime_json, args.bundle_json, args.other_cpu)
    return 0


def cpu_description() -> str:
    """This CPU in one line (scripts/cpu.py): model, cores, features, L3."""
    described = cpu.describe()
    l3 = f", L3 {described['l3_bytes'] >> 20} MiB" if described["l3_bytes"] else ""
    return (f"{described['model']} ({described['machine']}), {described['cores']} cores, features: "
            f"{', '.join(described['features']) or 'none found'}{l3}")


def full_widths(args: argparse.Namespace) -> dict:
    """`full_width_timing` at each of --full-width's sizes in each of --full-width-modes."""
    pairs = max(20, args.pairs // 3)   # the protocol: medians of >= 20 alternated pairs
    return {f"{size}px {mode}": full_width_timing(size, pairs, mode, args.executorch and i == 0, args.threads)
            for i, mode in enumerate(args.full_width_modes) for size in args.full_width}


def write_result(start: float, result: dict, out: Path | None) -> int:
    result["wall_s"] = round(time.perf_counter() - start, 1)
    print(json.dumps(result, indent=1))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


def write_sections(result: dict, runtime_json: Path | None, bundle_json: Path | None,
                   other_cpus: list[Path] = ()) -> None:
    """The `int8` sections of runtime.json (the summary, with `other_cpus`' timings beside it) and bundle.json
    (per storage mode at full width), each page beside them regenerated; bench_runtime and bench_bundle keep
    these sections when they rewrite."""
    if runtime_json:
        runtime = json.loads(runtime_json.read_text()) if runtime_json.exists() else {}
        runtime["int8"] = {**result["int8"], "command": result["command"], "cpu": result["cpu"]}
        if other_cpus:
            runtime["int8"]["other_cpus"] = [other_cpu_row(path) for path in other_cpus]
        runtime_json.write_text(json.dumps(runtime, indent=1) + "\n")
        if "cases" in runtime:   # the page beside it follows
            from scripts.bench_runtime import markdown

            runtime_json.with_suffix(".md").write_text(markdown(runtime))
    if bundle_json:
        bundle = json.loads(bundle_json.read_text())
        bundle["int8"] = {**result["int8"], "command": result["command"], "cpu": result["cpu"],
                          "modes": {key: {k: row[k] for k in ("mode", "personalize_ms", "personalize_over_fp32",
                                                              "int8_steps_ms", "inference_ms_batch1",
                                                              "inference_over_fp32_session", "file_ratio")}
                                    | ({"executorch": row["executorch"]} if "executorch" in row else {})
                                    for key, row in result.get("full_width", {}).items()}}
        from scripts.bench_bundle import write

        write(bundle, bundle_json.with_suffix(""))


def other_cpu_row(path: Path) -> dict:
    """One results file of another CPU in a line: its CPU, threads, and the int8 figures per size in its first
    storage mode (the recommended one). A --full-width-only file, or a whole run's (threads: onnxruntime's
    default), as this machine's earlier run kept under another name."""
    other = json.loads(path.read_text())
    sizes: dict[str, dict] = {}
    for key, row in other["full_width"].items():
        sizes.setdefault(key.split()[0], {k: row[k] for k in ("inference_over_fp32_session", "inference_ms_batch1",
                                                                 "personalize_ms", "int8_steps_ms")})
    return {"results": path.name, "cpu": other["cpu"], "threads": other.get("threads", "onnxruntime's default"),
            "command": other["command"], "full_width": sizes}


def summary(result: dict, sizes: list[int], modes: list[str], drop: list[float]) -> dict:
    """The issue's figures: accuracy on the bench tasks; inference and the file at full width, 224 px
    (else the bench size); personalize at full width in the first mode (the recommended compact one)."""
    full = result.get("full_width", {})
    at = next((k for k in (f"{size}px {modes[0]}" for size in ([224] + sizes)) if k in full), None)
    timing = full[at] if at else result["bench_size"]
    return {"accuracy_drop": round(float(np.mean(drop)), 2), "worst_group_drop": min(result["group_drop"].values()),
            "inference_over_fp32_session": timing["inference_over_fp32_session"],
            "personalize_ms": timing["personalize_ms"]["int8"],
            "personalize_over_fp32": timing["personalize_over_fp32"],
            "file_ratio": timing["file_ratio"], "measured_at": at or "bench size",
            **({"executorch_inference_over_fp32": timing["executorch"]["inference_over_fp32"],
                "executorch_file_ratio": timing["executorch"]["file_ratio"]} if "executorch" in timing else {}),
            "calibration": "none: ranges from the mixed batch norms (sdk.engines.int8)",
            "session_route": f"{timing.get('int8_route', 'not recorded')}: onnxruntime's optimized int8 graph made "
                             "once per bundle, at full width cut in two halves whose sessions are made at once on "
                             "two threads; each model's sessions read its values from its own graph and only "
                             "prepack them (sdk/engines/int8_session.py; full_width.*.session_routes: the others)"}


def export_sizes(models: dict) -> dict[str, int]:
    """Bytes of each model's .onnx export (model.export)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return {p: m.export(Path(tmp) / f"{p}.onnx").stat().st_size for p, m in models.items()}


RECOMMENDED_MODE = "drop:0.04+subspace:8+fp16"   # docs/runtime.md: the compact mode the SDK recommends


def alternated_medians(calls: dict, pairs: int, warm_up: int) -> dict[str, float]:
    """Each call's median time in ms over `pairs` rounds that run every call once, in turn (after `warm_up`
    untimed calls each): alternation spreads this noisy machine's slow spells over all of them alike."""
    for call in calls.values():
        for _ in range(warm_up):
            call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(pairs):
        for name, call in calls.items():
            t = time.perf_counter()
            call()
            times[name].append((time.perf_counter() - t) * 1000)
    return {name: statistics.median(v) for name, v in times.items()}


def executorch_timing(models: dict, size: int, pairs: int) -> dict:
    """Batch-1 inference of each model's .pte export in ExecuTorch (XNNPACK; an int8 model's runs XNNPACK's
    int8 kernels, export/int8_program.py) and the time to load each program, medians of alternated pairs;
    the files' bytes."""
    import tempfile

    import torch
    from executorch.runtime import Runtime

    with tempfile.TemporaryDirectory() as tmp:
        programs = {p: model.export(Path(tmp) / f"{p}.pte").read_bytes() for p, model in models.items()}
    sizes = {p: len(program) for p, program in programs.items()}
    methods = {p: Runtime.get().load_program(program).load_method("forward") for p, program in programs.items()}
    x = [torch.zeros(1, 3, size, size)]
    r = alternated_medians({p: (lambda m=m: m.execute(x)) for p, m in methods.items()}, pairs, warm_up=3)
    # What a personalize that wrote the weights into a lowered program would pay each time: loading it
    # (XNNPACK packs the weights at load), against onnxruntime's fresh int8 session (session_routes).
    load = alternated_medians({p: (lambda b=b: Runtime.get().load_program(b).load_method("forward"))
                               for p, b in programs.items()}, pairs, warm_up=1)
    return {"load_ms": {p: round(v, 1) for p, v in load.items()},
            "inference_ms_batch1": {p: round(v, 3) for p, v in r.items()},
            "inference_over_fp32": round(r["int8"] / r["float32"], 3), "pte_bytes": sizes,
            "file_ratio": round(sizes["int8"] / sizes["float32"], 3), "pairs": pairs}


def compact_random_bundle(path: Path, size: int, mode: str) -> Path:
    """A random full-width bundle (imagenet stem, 200 classes, 10 bases) stored in `mode` at `path`: for
    timing only (random weights say nothing of accuracy)."""
    from export.compress import Mode, compress
    from scripts.bench_bundle import run_shared
    from scripts.bench_runtime import random_bundle

    parsed = Mode.parse(mode)
    shared = run_shared(parsed, "imagenet", 1.0, 200)
    store = None if mode == "fp32" else (lambda b: compress(b, parsed, shared))
    return random_bundle(path, "imagenet", 1.0, 200, size, 10, store)


def full_width_timing(size: int, pairs: int, mode: str = "fp32", executorch: bool = False,
                      threads: int | None = None) -> dict:
    """Personalize and batch-1 inference, float32 vs int8, on a random full-width bundle (imagenet stem, 200
    classes, 10 bases) stored in `mode`: medians of alternated pairs; how else the int8 session could be
    made (`session_routes`); with `executorch`, the .pte exports' inference (`executorch_timing`)."""
    import tempfile


    with tempfile.TemporaryDirectory() as tmp:
        bundle = sdk.load(compact_random_bundle(Path(tmp) / "wide.taper", size, mode),
                          providers=["CPUExecutionProvider"], threads=threads).warm_up()
        ms: dict[str, list[float]] = {"float32": [], "int8": []}
        released: dict[str, list[float]] = {"float32": [], "int8": []}
        steps: dict[str, list[float]] = {}
        models = {}
        for _ in range(pairs):
            for precision in ms:
                t = time.perf_counter()
                model = sdk.personalize(bundle, "insect 0, insect 8, dog 1", precision=precision)
                ms[precision].append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                models[precision] = model   # the model before it is freed here (its sessions, for int8)
                released[precision].append((time.perf_counter() - t) * 1000)
            for step, value in models["int8"].timings.items():
                steps.setdefault(step, []).append(value)
        x = [np.zeros((size, size, 3), np.uint8)]
        r = alternated_medians({p: (lambda m=m: m.logits(x)) for p, m in models.items()}, pairs, warm_up=1)
        p = {k: statistics.median(v) for k, v in ms.items()}
        sizes = export_sizes(models)
        routes = session_routes(models["int8"], size, pairs, threads)
        shipped = bundle.engine.int8_sessions
        route = shipped.name + (f" (cut after node {shipped.cut})" if getattr(shipped, "cut", None) else "")
        pte = {"executorch": executorch_timing(models, size, pairs)} if executorch else {}
    return {**pte, "mode": mode, "onnx_bytes": sizes, "file_ratio": round(sizes["int8"] / sizes["float32"], 3),
            "personalize_ms": {k: round(v, 1) for k, v in p.items()},
            "personalize_over_fp32": round(p["int8"] / p["float32"], 2),
            "release_previous_ms": {k: round(statistics.median(v), 2) for k, v in released.items()},
            "int8_steps_ms": {k: round(statistics.median(v), 2) for k, v in steps.items()},
            "inference_ms_batch1": {k: round(v, 2) for k, v in r.items()},
            "inference_over_fp32_session": round(r["int8"] / r["float32"], 3), "pairs": pairs,
            "int8_route": route, "session_routes": routes}


def session_routes(model, size: int, pairs: int, threads: int | None = None) -> dict:
    """What each way of getting an int8 model into onnxruntime costs (medians of `pairs`): a fresh session
    of the QDQ graph (onnxruntime fuses QDQ into integer kernels, rewrites them for the CPU and prepacks the
    weights); onnxruntime's optimized graph made once, each model's values read from its graph bytes, so
    only the prepacking is per model, whole and cut in two halves whose sessions are made at once on two
    threads (`sdk.engines.int8_session`: personalize() takes the latter where it serves); and one session made once
    whose int8 weights, scales and biases are graph inputs (nothing made per model, but the kernels repack
    the weights on every run). `inference_ms_batch1` is one run of the network each makes."""
    import tempfile

    import onnx
    import onnxruntime as ort

    from sdk.engines.int8_session import FreshInt8Sessions, OptimizedInt8Sessions
    from sdk.engines.network import head_inputs

    level = ort.GraphOptimizationLevel
    image = np.zeros((1, 3, size, size), np.float32)
    heads = head_inputs(model.head_weight, model.head_bias)
    x = {"image": image, **heads}

    def session(graph: bytes, optimization) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.graph_optimization_level = optimization
        if threads:
            options.intra_op_num_threads = threads
        return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])

    def timed(fn) -> tuple[float, object]:
        t = time.perf_counter()
        out = fn()
        return (time.perf_counter() - t) * 1000, out

    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.graph_optimization_level = level.ORT_ENABLE_EXTENDED   # portable: no NCHWc layout
        options.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        ort.InferenceSession(model.int8_graph, options, providers=["CPUExecutionProvider"])
        optimized = (Path(tmp) / "optimized.onnx").read_bytes()
    proto = onnx.load_from_string(optimized)
    feeds = {}
    for init in list(proto.graph.initializer):
        feeds[init.name] = onnx.numpy_helper.to_array(init)
        proto.graph.input.append(onnx.helper.make_tensor_value_info(init.name, init.data_type,
                                                                    list(feeds[init.name].shape)))
    del proto.graph.initializer[:]
    as_inputs = proto.SerializeToString()
    shipped = model.source.engine.int8_sessions
    graph = model.int8_graph

    def fresh():
        s = FreshInt8Sessions(["CPUExecutionProvider"], threads).open(graph)
        return lambda: s.run(None, x)

    def network(route):
        def make():
            n = route.network(graph, heads)
            return lambda: n.run(image)
        return make

    def inputs():
        s = session(as_inputs, level.ORT_DISABLE_ALL)
        return lambda: s.run(None, {**x, **feeds})

    routes = {"fresh_qdq_session": fresh}
    if shipped.name != "fresh":
        routes["optimized_once"] = network(OptimizedInt8Sessions(shipped.optimized, threads))
        if shipped.cut is not None:
            routes["optimized_once_in_two_halves"] = network(shipped)
    routes["weights_as_inputs"] = inputs
    made: dict[str, list[float]] = {k: [] for k in routes}
    ran: dict[str, list[float]] = {k: [] for k in routes}
    for _ in range(pairs):
        for name, make in routes.items():
            ms, run = timed(make)
            made[name].append(ms)
            run()
            ran[name].append(timed(run)[0])
    return {name: {"session_ms": round(statistics.median(made[name]), 1),
                   "inference_ms_batch1": round(statistics.median(ran[name]), 2),
                   "per_model_ms": 0.0 if name == "weights_as_inputs" else round(statistics.median(made[name]), 1)}
            for name in routes}


if __name__ == "__main__":
    raise SystemExit(main())
