"""Issue 61, part 1's question: can a personalized model be quantized to int8 on the device without
calibration photos, from the folded batch-norm statistics (the data-free ranges of Nagel et al., 2019)?

    python -m lab.int8_data_free ~/.cache/taper-sdk/demo/<key>/run --out docs/results/int8_data_free

On a run's stage-1 network (the generic one; width and size as trained), folded exactly as the SDK folds
(sdk.fusion.folding) into the bundle's own backbone graph (export.backbone) with its classifier:
- fp32: that graph in onnxruntime;
- calibrated: onnxruntime.quantization.quantize_static, QDQ, per-channel int8 weights, uint8 activations,
  MinMax ranges from CALIBRATION training images (the tools' way: needs photos);
- noise: the same, calibrated with as many N(0, 1) images (what a device without photos could do naively);
- data-free (k): the same graph and quantizer, every activation range given instead (TensorQuantOverrides)
  from per-channel Gaussian moments propagated through the graph: a conv's output channel c is
  N(beta_c, gamma_c^2) (its batch norm's shift and scale), a ReLU's output the rectified Gaussian's
  moments, an Add's the sum of its inputs' (independent), pools keep their input's; the range is
  [min_c(mu - k sigma), max_c(mu + k sigma)], clipped at 0 after a ReLU; the image's range is exact
  (the normalisation of [0, 1] pixels). k is chosen on TUNING training images (top-1), then reported on val.
Reported: top-1 over all classes and classifier selection on the run's 20-way tasks (its eval seeds), on
the val images; and inference time, fp32 vs int8, batch 1, medians of alternated pairs, at the run's size
and at full width 224 px (weights from the same construction with random batch norms: time only), with the
optimized graph's operator counts (is any float Conv left?).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static

from export.backbone import export_backbone
from sdk.format.onnx_proto import append_linear_head, inline_external_data, inputs_to_initializers
from sdk.fusion.architecture import conv_bn_pairs, parameter_shapes
from sdk.fusion.folding import BACKBONE_FILE, fold_batch_norm
from sdk.media.preprocessing import Preprocessing
from trainer.config import TrainConfig
from trainer.data.tasks import TaskSampler
from trainer.evaluate import Evaluator
from trainer.run import load_model, make_context
from trainer.rundir import RunDir

CALIBRATION, TUNING = 128, 2000
KS = (2.0, 3.0, 4.0, 6.0, 8.0)


def fp32_graph(state: dict[str, np.ndarray], stem: str, width: float, size: int) -> bytes:
    """The bundle's backbone graph with these weights folded into it and the classifier appended: image ->
    logits, self-contained."""
    graph, layout, total = export_backbone(stem, width, size)
    buffer = np.zeros(total // 4, np.float32)
    out = {name: buffer[e["offset"] // 4: e["offset"] // 4 + math.prod(e["shape"])].reshape(e["shape"])
           for name, e in layout.items()}
    fold_batch_norm(state, out)
    graph = inline_external_data(graph, BACKBONE_FILE, buffer.view(np.uint8))
    graph = append_linear_head(graph, "features", state["fc.weight"].shape[1], "head_weight", "head_bias", "logits")
    return inputs_to_initializers(graph, {
        "head_weight": (list(state["fc.weight"].shape), np.ascontiguousarray(state["fc.weight"], "<f4").tobytes()),
        "head_bias": (list(state["fc.bias"].shape), np.ascontiguousarray(state["fc.bias"], "<f4").tobytes())})


def rectified(mu: np.ndarray, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of max(0, x) for x ~ N(mu, sigma^2), per channel."""
    from math import erf, pi, sqrt

    s = np.maximum(sigma, 1e-8)
    a = mu / s
    cdf = 0.5 * (1 + np.vectorize(erf)(a / sqrt(2)))
    pdf = np.exp(-0.5 * a * a) / sqrt(2 * pi)
    mean = mu * cdf + s * pdf
    second = (mu * mu + s * s) * cdf + mu * s * pdf
    return mean, np.sqrt(np.maximum(second - mean * mean, 0))


def data_free_ranges(model: onnx.ModelProto, state: dict[str, np.ndarray], pre: Preprocessing, k: float,
                     pooled: bool = False) -> dict[str, tuple[float, float]]:
    """Every activation tensor's (rmin, rmax) from the batch norms alone (see the module docstring)."""
    bn_of = dict(conv_bn_pairs(state))
    mean, std = np.array(pre.mean), np.array(pre.std)
    moments = {"image": ((0.5 - mean) / std, np.full(3, 1.0))}   # only used if something reads them
    ranges = {"image": (float(((0 - mean) / std).min()), float(((1 - mean) / std).max()))}
    relu_out = set()
    for node in model.graph.node:
        out = node.output[0]
        if node.op_type == "Conv":
            bn = bn_of[node.input[1].removesuffix(".weight")]
            moments[out] = (state[f"{bn}.bias"].astype(np.float64), np.abs(state[f"{bn}.weight"]).astype(np.float64))
        elif node.op_type == "Relu":
            moments[out] = rectified(*moments[node.input[0]])
            relu_out.add(out)
        elif node.op_type == "Add":
            (m1, s1), (m2, s2) = moments[node.input[0]], moments[node.input[1]]
            moments[out] = (m1 + m2, np.sqrt(s1 * s1 + s2 * s2))
        elif node.op_type in ("MaxPool", "GlobalAveragePool", "Flatten"):
            moments[out] = moments[node.input[0]]
            if node.op_type == "GlobalAveragePool" and pooled:  # an average of the map: its mean, a narrow spread
                mu, sigma = moments[out]
                moments[out] = (mu, sigma / 4)
            if node.input[0] in relu_out:
                relu_out.add(out)
        else:
            continue
        mu, sigma = moments[out]
        low = 0.0 if out in relu_out else float((mu - k * sigma).min())
        ranges[out] = (low, float((mu + k * sigma).max()))
    return ranges


class Images(CalibrationDataReader):
    def __init__(self, images: np.ndarray):
        self.rows = iter(images[i:i + 1] for i in range(len(images)))

    def get_next(self):
        row = next(self.rows, None)
        return None if row is None else {"image": row}


REDUCE_RANGE = False   # --reduce-range: 7-bit weights (onnxruntime's advice for u8s8 on AVX2 without VNNI)
FLOAT_HEAD = False     # --float-head: the classifier (Gemm) stays float, as the runtime feeds it as inputs


def quantize(fp32: bytes, folder: Path, name: str, images: np.ndarray,
             ranges: dict[str, tuple[float, float]] | None = None) -> bytes:
    """QDQ int8: per-channel weights, uint8 activations; MinMax over `images`, or the given ranges."""
    src, dst = folder / "fp32.onnx", folder / f"{name}.onnx"
    src.write_bytes(fp32)
    overrides = {t: [{"rmin": np.float32(lo), "rmax": np.float32(hi)}] for t, (lo, hi) in (ranges or {}).items()}
    excluded = [n.name for n in onnx.load_from_string(fp32).graph.node if n.op_type == "Gemm"] if FLOAT_HEAD else []
    quantize_static(str(src), str(dst), Images(images), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax, reduce_range=REDUCE_RANGE, nodes_to_exclude=excluded,
                    extra_options={"TensorQuantOverrides": overrides} if overrides else {})
    return dst.read_bytes()


def session(graph: bytes, optimized: Path | None = None) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if optimized is not None:
        options.optimized_model_filepath = str(optimized)
    return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


def logits(graph: bytes, x: np.ndarray, batch: int = 256) -> torch.Tensor:
    s = session(graph)
    return torch.from_numpy(np.concatenate([s.run(None, {"image": x[i:i + batch]})[0]
                                            for i in range(0, len(x), batch)]))


def op_counts(graph: bytes, folder: Path) -> dict[str, int]:
    path = folder / "optimized.onnx"
    session(graph, path)
    model = onnx.load(str(path))
    counts: dict[str, int] = {}
    for node in model.graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return dict(sorted(counts.items()))


def timing(fp32: bytes, int8: bytes, size: int, pairs: int) -> dict:
    """Median ms of batch-1 inference, alternated pairs (fp32 then int8), and the ratio of medians."""
    x = np.random.default_rng(0).normal(size=(1, 3, size, size)).astype(np.float32)
    sessions = {"fp32": session(fp32), "int8": session(int8)}
    for s in sessions.values():
        for _ in range(5):
            s.run(None, {"image": x})
    times: dict[str, list[float]] = {"fp32": [], "int8": []}
    repeats = max(1, int(0.02 / max(1e-4, _once(sessions["fp32"], x))))
    for _ in range(pairs):
        for name, s in sessions.items():
            start = time.perf_counter()
            for _ in range(repeats):
                s.run(None, {"image": x})
            times[name].append((time.perf_counter() - start) * 1000 / repeats)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"fp32_ms": round(med["fp32"], 3), "int8_ms": round(med["int8"], 3),
            "int8_over_fp32": round(med["int8"] / med["fp32"], 3), "pairs": pairs, "runs_per_sample": repeats}


def _once(s: ort.InferenceSession, x: np.ndarray) -> float:
    start = time.perf_counter()
    s.run(None, {"image": x})
    return time.perf_counter() - start


def random_state(stem: str, width: float, classes: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Weights of the architecture with random batch norms (speed only)."""
    rng = np.random.default_rng(seed)
    state = {}
    for name, shape in parameter_shapes(stem, width, classes).items():
        if name.endswith("running_var"):
            state[name] = rng.uniform(0.5, 2, shape).astype(np.float32)
        elif name.endswith(".weight") and len(shape) == 1:
            state[name] = rng.uniform(0.5, 1.5, shape).astype(np.float32)
        else:
            fan = max(1, int(np.prod(shape[1:]))) if len(shape) > 1 else 1
            state[name] = (rng.normal(size=shape) / math.sqrt(fan)).astype(np.float32)
    return state


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.int8_data_free", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--reduce-range", action="store_true", help="7-bit weights (u8s8 saturation on AVX2)")
    parser.add_argument("--pooled", action="store_true", help="the pooled features' spread a quarter of the "
                        "map's (variant 2, written after variant 1's result)")
    parser.add_argument("--float-head", action="store_true", help="the classifier stays float (variant 3)")
    args = parser.parse_args(argv)
    global REDUCE_RANGE, FLOAT_HEAD
    REDUCE_RANGE, FLOAT_HEAD = args.reduce_range, args.float_head
    start = time.perf_counter()
    config = TrainConfig.load(RunDir(args.run_dir).config)
    ctx = make_context(args.run_dir, config, progress=False)
    evaluator = Evaluator(ctx.data, ctx.model_config, ctx.preprocessing, config.eval_images_per_class)
    state = {k: v.numpy() for k, v in load_model(ctx.model_config, RunDir(args.run_dir).model("stage1"))
             .state_dict().items() if not k.endswith("num_batches_tracked")}
    fp32 = fp32_graph(state, config.stem, config.width, config.input_size)
    from trainer.data.transforms import to_normalized_tensor

    rng = np.random.default_rng(0)
    train = ctx.data.train
    pick = np.sort(rng.choice(len(train), CALIBRATION + TUNING, replace=False))
    photos = to_normalized_tensor(torch.from_numpy(np.ascontiguousarray(train.images[pick])),
                                  ctx.preprocessing).numpy()
    calibration, tuning, tuning_labels = photos[:CALIBRATION], photos[CALIBRATION:], train.labels[pick][CALIBRATION:]
    noise = rng.normal(size=calibration.shape).astype(np.float32)
    val_x = evaluator.x.numpy() if isinstance(evaluator.x, torch.Tensor) else evaluator.x
    sampler = TaskSampler(ctx.data.hierarchy, k=config.task_k)
    tasks = [sampler.evaluation_tasks(seed) for seed in config.eval_seeds]
    model = onnx.load_from_string(fp32)

    def scores(graph: bytes) -> dict:
        z = logits(graph, val_x)
        top1 = 100.0 * float((z.argmax(1) == evaluator.labels).float().mean())
        selection = float(np.mean([evaluator.static(z, t)[0] for t in tasks]))
        return {"top1": round(top1, 2), "classifier_selection": round(selection, 2)}

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        graphs = {"fp32": fp32, "calibrated": quantize(fp32, folder, "calibrated", calibration),
                  "noise": quantize(fp32, folder, "noise", noise)}
        tuned = {}
        for k in KS:
            graph = quantize(fp32, folder, f"k{k}", calibration[:1],
                             data_free_ranges(model, state, ctx.preprocessing, k, args.pooled))
            z = logits(graph, tuning)
            tuned[k] = round(100.0 * float((z.argmax(1).numpy() == tuning_labels).mean()), 2)
        best = max(KS, key=lambda k: (tuned[k], -k))
        graphs["data_free"] = quantize(fp32, folder, "data_free", calibration[:1],
                                       data_free_ranges(model, state, ctx.preprocessing, best, args.pooled))
        accuracy = {name: scores(graph) for name, graph in graphs.items()}
        ops = op_counts(graphs["data_free"], folder)
        speed = {f"{config.input_size}px_width{config.width}": timing(fp32, graphs["data_free"], config.input_size,
                                                                    args.pairs)}
        full = random_state("imagenet", 1.0, 200)
        full_fp32 = fp32_graph(full, "imagenet", 1.0, 224)
        sample224 = rng.normal(size=(1, 3, 224, 224)).astype(np.float32)   # every range is given: only read
        full_int8 = quantize(full_fp32, folder, "full", sample224,
                             data_free_ranges(onnx.load_from_string(full_fp32), full, Preprocessing(224), 4.0))
        speed["224px_width1.0"] = timing(full_fp32, full_int8, 224, max(10, args.pairs // 3))
        full64 = fp32_graph(full, "imagenet", 1.0, 64)
        speed["64px_width1.0"] = timing(full64, quantize(full64, folder, "full64", calibration[:1], data_free_ranges(
            onnx.load_from_string(full64), full, Preprocessing(64), 4.0)), 64, args.pairs)
        full_ops = op_counts(full_int8, folder)
    base = accuracy["fp32"]
    result = {
        "command": "python -m lab.int8_data_free " + " ".join(argv or __import__("sys").argv[1:]),
        "run": args.run_dir.name, "network": f"stage 1, {config.stem} stem, width {config.width}, "
                                            f"{config.input_size} px, {ctx.data.num_classes} classes",
        "val_images": int(len(val_x)), "tasks": f"{len(tasks)} seeds x {len(tasks[0])} tasks of {config.task_k}",
        "accuracy": accuracy,
        "drop": {name: {m: round(v[m] - base[m], 2) for m in v} for name, v in accuracy.items() if name != "fp32"},
        "data_free_k": best, "tuning_top1_by_k": tuned, "calibration_images": CALIBRATION,
        "tuning_images": TUNING, "reduce_range": args.reduce_range, "pooled": args.pooled,
        "float_head": args.float_head, "speed": speed,
        "optimized_ops_int8": ops, "optimized_ops_int8_224": full_ops,
        "machine": f"{platform.processor() or platform.machine()}, onnxruntime {ort.__version__}, "
                   f"cpu flags: {' '.join(sorted(_int_flags()))}",
        "wall_s": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


def _int_flags() -> set[str]:
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return set()
    wanted = {"avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8", "amx_tile"}
    return wanted & set(flags.split(":")[1].split())


if __name__ == "__main__":
    raise SystemExit(main())
