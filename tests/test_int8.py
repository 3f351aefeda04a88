"""int8 personalized models (sdk/engines/int8.py, issue 61): quantized on the device from the mixed batch norms, no
photos; onnxruntime fuses the graph into integer kernels (no float Conv left); the int8 model classifies as
the float32 one does; what it cannot do yet is refused, not done in float32 under its name."""

import json
from collections import Counter
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import sdk
from sdk.engines.int8 import WEIGHT_QMAX, WEIGHT_QMIN, activation_scale, quantize_model, quantize_weight
from sdk.errors import DescriptionError
from sdk.fusion.folding import fold_batch_norm, folded_names


def test_weights_are_7_bit_per_channel_and_scales_are_onnxruntimes():
    w = np.array([[[[1.0, -2.0]]], [[[0.0, 0.0]]], [[[0.5, 0.25]]]], np.float32)
    q, scale = quantize_weight(w)
    assert q.dtype == np.int8 and q.min() >= WEIGHT_QMIN and q.max() <= WEIGHT_QMAX
    assert np.allclose(q.reshape(3, 2)[0] * scale[0], [1.0, -2.0], atol=scale[0] / 2) and scale[1] == 1.0
    assert activation_scale(0.0, 2.55) == (pytest.approx(0.01), 0) and activation_scale(-1.0, 1.0)[1] == 128
    assert activation_scale(0.0, 0.0) == (1.0, 0)   # a dead channel range gets a harmless scale


def test_the_int8_graph_runs_in_integer_kernels(tiny_sdk, tmp_path):
    model = sdk.personalize(tiny_sdk, "rings", precision="int8")
    mixed = tiny_sdk.bundle.bases.mixed(model.alpha)
    folded = {n: np.empty(s, np.float32) for n, s in folded_names(tiny_sdk.bundle.bases.shapes).items()}
    fold_batch_norm(mixed, folded)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(quantize_model(tiny_sdk.engine.graph, folded, mixed, tiny_sdk.preprocessing), options,
                         providers=["CPUExecutionProvider"])
    import onnx

    ops = Counter(n.op_type for n in onnx.load(str(tmp_path / "optimized.onnx")).graph.node)
    convs = sum(1 for n in folded if n.endswith(".weight"))
    assert ops["QLinearConv"] == convs and ops["Conv"] == 0 and ops["QLinearAdd"] == 8, ops
    assert model.precision == "int8" and set(model.timings) >= {"fuse_fold", "quantize", "session"}


def test_int8_classifies_as_float32_does(tiny_sdk, tiny_data):
    names = [c.name for c in tiny_sdk.bundle.classes]
    images = list(np.asarray(tiny_data.val.images))
    truth = [names[i] for i in tiny_data.val.labels]
    for description in ("rings", "round shapes", ["red disc", "blue ring", "green stripes"]):
        fp32 = sdk.personalize(tiny_sdk, description)
        int8 = sdk.personalize(tiny_sdk, description, precision="int8")
        assert int8.classes == fp32.classes
        a, b = [p for p, _ in fp32.predict(images)], [p for p, _ in int8.predict(images)]
        agree = np.mean([x == y for x, y in zip(a, b, strict=True)])
        acc = [np.mean([p == t for p, t in zip(pred, truth, strict=True)]) for pred in (a, b)]
        assert agree >= 0.9 and acc[1] >= acc[0] - 0.05, (description, agree, acc)


def test_what_int8_cannot_do_yet_is_refused(tiny_sdk):
    with pytest.raises(DescriptionError, match="precision must be one of"):
        sdk.personalize(tiny_sdk, "rings", precision="int4")
    with pytest.raises(DescriptionError, match="descriptions only"):
        sdk.personalize(tiny_sdk, examples={"a": [np.zeros((8, 8, 3), np.uint8)] * 2,
                                            "b": [np.ones((8, 8, 3), np.uint8)] * 2}, precision="int8")


def test_an_int8_model_exports_to_core_ml_with_its_int8_weights(tiny_sdk, tmp_path):
    """Core ML prediction needs macOS: here the network converted is checked to compute with the model's own
    int8 weights, and the package to hold every conv weight as int8 (constexpr_affine_dequantize), the
    classifier float, its precision in the metadata."""
    ct = pytest.importorskip("coremltools")
    from export.personalized import PersonalizedNetwork
    from sdk.engines.int8 import int8_weights

    model = sdk.personalize(tiny_sdk, "rings", precision="int8")
    state = PersonalizedNetwork.of(model).backbone.state_dict()
    weights = int8_weights(model.int8_graph)
    assert weights and all(np.array_equal(state[k].numpy(), v) for k, v in weights.items())
    spec = ct.utils.load_spec(str(model.export(tmp_path / "m.mlpackage")))
    main = spec.mlProgram.functions["main"]
    operations = main.block_specializations[main.opset].operations
    quantized = [op for op in operations if op.type == "constexpr_affine_dequantize"]
    assert len(quantized) == len(weights) == sum(op.type == "conv" for op in operations)
    assert dict(spec.description.metadata.userDefined)["precision"] == "int8 weights, float16 compute"


def test_an_int8_model_exports_to_onnx_as_it_runs(tiny_sdk, tiny_data, tmp_path):
    """The .onnx of an int8 model is its QDQ graph with the head inside: smaller than the float32 file, the
    same logits as the model (onnxruntime, fresh session), and its precision in the metadata."""
    import json

    import onnx

    from sdk.engines.int8_session import FreshInt8Sessions

    int8 = sdk.personalize(tiny_sdk, "rings", precision="int8")
    fp32 = sdk.personalize(tiny_sdk, "rings")
    path8, path32 = int8.export(tmp_path / "m8.onnx"), fp32.export(tmp_path / "m32.onnx")
    meta = {p.key: p.value for p in onnx.load(str(path8)).metadata_props}
    assert meta["precision"] == "int8" and json.loads(meta["classes"]) == int8.classes
    assert {p.key: p.value for p in onnx.load(str(path32)).metadata_props}["precision"] == "float32"
    assert path8.stat().st_size < 0.5 * path32.stat().st_size
    images = np.asarray(tiny_data.val.images[:16])   # already the bundle's input size
    session = FreshInt8Sessions(["CPUExecutionProvider"], None).open(path8.read_bytes())
    exported = session.run(None, {"image": tiny_sdk.preprocessing.normalize(images)})[0]
    assert np.allclose(exported, int8.logits(list(images)), atol=1e-4)


def test_the_cli_takes_int8_and_exports_it_to_onnx(tiny_bundle, tmp_path, capsys):
    import json

    from sdk.__main__ import main

    args = ["personalize", str(tiny_bundle), "rings", "--precision", "int8"]
    assert main([*args, "--json", "--export", str(tmp_path / "m.onnx")]) == 0
    assert json.loads(capsys.readouterr().out)["precision"] == "int8" and (tmp_path / "m.onnx").is_file()


def test_an_int8_executorch_program_runs_xnnpacks_int8_kernels_as_the_model_does(tiny_sdk, tiny_data, tmp_path):
    """The .pte of an int8 model replays its int8 graph (export/int8_program.py): the export itself refuses a
    program where a conv or a (de)quantize stays outside XNNPACK; its weights are int8 (under half the float32
    model's file); its logits are the model's (onnxruntime's int8 kernels) within a tenth of what int8 changes."""
    torch = pytest.importorskip("torch")
    from executorch.runtime import Runtime

    int8 = sdk.personalize(tiny_sdk, "rings", precision="int8")
    fp32 = sdk.personalize(tiny_sdk, "rings")
    path8, path32 = int8.export(tmp_path / "m8.pte"), fp32.export(tmp_path / "m32.onnx")   # float32's bytes
    assert json.loads((tmp_path / "m8.pte.json").read_text())["precision"] == "int8"
    assert path8.stat().st_size < 0.5 * path32.stat().st_size
    images = np.asarray(tiny_data.val.images[:8])
    method = Runtime.get().load_program(path8).load_method("forward")
    out = method.execute([torch.from_numpy(tiny_sdk.preprocessing.normalize(images))])[0].numpy()
    model8, model32 = int8.logits(list(images)), fp32.logits(list(images))
    assert np.abs(out - model8).max() <= 1e-4 + 0.1 * np.abs(model8 - model32).max()
    assert np.abs(model8 - model32).max() > 1e-3   # int8 is not float32 here: the bound above means something


def test_the_native_quantizer_writes_numpys_int8_weights_bit_for_bit():
    """Both builds of the C quantizer (the CPU's and the baseline ISA's) against `quantize_weight`: random
    weights, exact ties after the division (rint rounds them to even), a zero row, a row of -0, denormal-small
    rows, a row's maximum in the vectorised part and in the scalar tail."""
    from sdk.fusion.native import NativeKernel, available_builds, native_kernel

    kernel = native_kernel()
    if kernel is None or kernel._quantize is None:
        pytest.skip("the native kernel is not built here")
    rng = np.random.default_rng(7)
    weight = (rng.standard_normal((64, 3 * 3 * 40)) * 0.05).astype(np.float32)
    weight[:16] = (rng.integers(-127, 128, (16, weight.shape[1])) * 0.5).astype(np.float32) / 64   # ties
    weight[16] = 0.0
    weight[17] *= np.float32(1e-36)
    weight[18, -1] = -9.0   # the largest magnitude negative, past the last whole vector (360 = 11 x 32 + 8)
    weight[19] = -0.0
    weight[20, 5] = 9.0     # ... and in the first
    want_q, want_scale = quantize_weight(weight)
    for k in [kernel] + [NativeKernel(kernel._library, build=b) for b in available_builds(kernel._library)]:
        q, scale = np.empty(weight.shape, np.int8), np.empty(len(weight), np.float32)
        assert k.quantize_rows(weight, WEIGHT_QMIN, WEIGHT_QMAX, q, scale)
        assert np.array_equal(q, want_q) and np.array_equal(scale.view(np.uint32), want_scale.view(np.uint32))
    # Several layers at once, their rows shared out over the threads (one of a single row, fewer than threads).
    layers = [weight, (rng.standard_normal((1, 27)) * 0.1).astype(np.float32),
              (rng.standard_normal((9, 4, 3, 3)) * 0.2).astype(np.float32)]
    outputs = [(np.empty(w.shape, np.int8), np.empty(len(w), np.float32)) for w in layers]
    assert kernel.quantize_layers([(w, q, s) for w, (q, s) in zip(layers, outputs, strict=True)], WEIGHT_QMIN,
                                  WEIGHT_QMAX)
    for w, (q, s) in zip(layers, outputs, strict=True):
        want_q, want_scale = quantize_weight(w)
        assert np.array_equal(q, want_q) and np.array_equal(s.view(np.uint32), want_scale.view(np.uint32))


def test_a_plan_quantizes_each_model_anew_in_its_one_buffer(tiny_sdk):
    """The runtime keeps one Int8Plan and its buffer: a model's graph is what a fresh plan writes, whatever
    model came before it (every slot is overwritten)."""
    from sdk.engines.int8 import Int8Plan

    def graph(plan, alpha):
        folded = {n: np.empty(s, np.float32) for n, s in folded_names(tiny_sdk.bundle.bases.shapes).items()}
        fold_batch_norm(tiny_sdk.bundle.bases.mixed(alpha), folded)
        return plan.quantize(folded, tiny_sdk.bundle.bases.mixed_channels(alpha))

    alphas = [sdk.personalize(tiny_sdk, d).alpha for d in ("rings", "red disc, green stripes")]
    kept = Int8Plan(tiny_sdk.engine.graph, tiny_sdk.preprocessing)
    first = graph(kept, alphas[0])
    assert first != graph(kept, alphas[1]) == graph(Int8Plan(tiny_sdk.engine.graph, tiny_sdk.preprocessing),
                                                     alphas[1])
    assert graph(kept, alphas[0]) == first
    # What a stored route is checked against (sdk/engines/int8_route_cache.py): the same for every plan of this graph.
    assert kept.layout_sha256 == Int8Plan(tiny_sdk.engine.graph, tiny_sdk.preprocessing).layout_sha256


def test_the_normal_cdf_is_within_its_stated_error():
    import math

    from sdk.engines.int8 import normal_cdf

    a = np.linspace(-10, 10, 4001)
    exact = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in a])
    assert np.max(np.abs(normal_cdf(a) / exact - 1)) < 1.2e-7


def test_bench_int8_writes_its_sections_and_the_benches_that_rewrite_those_files_keep_them(tmp_path):
    """bench_int8's `int8` sections of runtime.json and bundle.json (from its committed results: nothing is
    measured here), the pages beside them regenerated; bench_bundle's rewrite keeps bundle.json's section."""
    import shutil

    from scripts import bench_bundle
    from scripts.bench_int8 import write_sections

    results = Path(__file__).resolve().parents[1] / "docs" / "results"
    for name in ("runtime.json", "bundle.json"):
        shutil.copy(results / name, tmp_path / name)
    measured = json.loads((results / "int8_runtime.json").read_text())
    other = results / "int8_cpu_xeon_amx_t2.json"   # a --full-width-only run on another CPU
    write_sections(measured, tmp_path / "runtime.json", tmp_path / "bundle.json", [other])
    row = json.loads((tmp_path / "runtime.json").read_text())["int8"]["other_cpus"][0]
    figure = json.loads(other.read_text())["full_width"]["224px drop:0.04+subspace:8+fp16"]
    assert row["full_width"]["224px"]["inference_over_fp32_session"] == figure["inference_over_fp32_session"]
    assert "amx_int8" in row["cpu"] and f"| `{other.name}` |" in (tmp_path / "runtime.md").read_text()
    bundle = json.loads((tmp_path / "bundle.json").read_text())
    assert bundle["int8"]["command"] == measured["command"]
    assert set(bundle["int8"]["modes"]) == set(measured["full_width"])
    page = (tmp_path / "bundle.md").read_text()
    assert "## int8 per storage mode" in page and all(f"| {key} |" in page for key in measured["full_width"])
    assert json.loads((tmp_path / "runtime.json").read_text())["int8"]["accuracy_drop"] == measured["int8"][
        "accuracy_drop"]
    del bundle["int8"]   # a bench_bundle run writes its own result, without the section
    bench_bundle.write(bundle, tmp_path / "bundle")
    assert json.loads((tmp_path / "bundle.json").read_text())["int8"]["command"] == measured["command"]


def test_int8_sessions_come_from_the_graph_optimized_once_and_compute_what_a_fresh_session_does(tiny_bundle):
    """The optimized route (sdk/engines/int8_session.py) serves the tiny bundle's int8 models: each model's session
    reads its values from its own graph bytes, and its logits are a fresh session's of the same graph, bit
    for bit, for models other than the first (the one the route was checked on)."""
    from sdk.engines.int8_session import FreshInt8Sessions

    bundle = sdk.load(tiny_bundle, providers=["CPUExecutionProvider"])
    models = [sdk.personalize(bundle, d, precision="int8") for d in ("rings", "red disc, green stripes", "shapes")]
    assert bundle.engine.int8_sessions.name == "optimized once"
    size = bundle.preprocessing.input_size
    image = np.random.default_rng(1).integers(0, 255, (3, size, size, 3), np.uint8)
    fresh = FreshInt8Sessions(["CPUExecutionProvider"], None)
    for model in models[1:]:
        feeds = {"image": bundle.preprocessing.normalize(image), "head_weight": model.head_weight,
                 "head_bias": model.head_bias}
        assert np.array_equal(model.logits(list(image)), fresh.open(model.int8_graph).run(None, feeds)[0])
    assert len({m.int8_graph for m in models}) == 3


def test_the_optimized_int8_route_declines_what_it_cannot_serve(tiny_bundle, monkeypatch, caplog):
    """Not on other providers, not with device_compile=False, and not where onnxruntime optimizes a graph of
    other values into another structure (here: a probe whose bias scales are not its input's times its
    weights', which onnxruntime then does not fuse): the fresh route serves, and why is logged."""
    import logging

    from sdk.engines.int8 import Int8Plan
    from sdk.engines.int8_session import Int8RouteDeclined, optimized_int8_sessions

    bundle = sdk.load(tiny_bundle, providers=["CPUExecutionProvider"], device_compile=False)
    model = sdk.personalize(bundle, "rings", precision="int8")
    assert bundle.engine.int8_sessions.name == "fresh"
    plan = bundle._int8_plan
    with pytest.raises(Int8RouteDeclined, match="CPU-specific"):
        optimized_int8_sessions(plan, model.int8_graph, ["CUDAExecutionProvider", "CPUExecutionProvider"], None)

    plan_probe = Int8Plan.probe

    def inconsistent_probe(self, seed=0):
        buffer = bytearray(plan_probe(self, seed))
        for name, slot in self.slots.items():
            if name.endswith(".bias_scale"):
                slot.view(buffer)[:] *= 3
        return bytes(buffer)

    monkeypatch.setattr(Int8Plan, "probe", inconsistent_probe)
    with pytest.raises(Int8RouteDeclined, match="another structure"):
        optimized_int8_sessions(plan, model.int8_graph, ["CPUExecutionProvider"], None)
    fresh = sdk.load(tiny_bundle, providers=["CPUExecutionProvider"])
    with caplog.at_level(logging.DEBUG, logger="sdk.engines.onnxruntime"):
        again = sdk.personalize(fresh, "rings", precision="int8")
    assert fresh.engine.int8_sessions.name == "fresh" and "another structure" in caplog.text
    assert again.int8_graph == model.int8_graph


def test_warm_up_for_int8_makes_the_plan_and_the_session_route_before_the_first_model(tiny_bundle):
    bundle = sdk.load(tiny_bundle, providers=["CPUExecutionProvider"])
    with pytest.raises(DescriptionError, match="precision"):
        bundle.warm_up(precision="int4")
    assert bundle.warm_up(precision="int8") is bundle
    route, plan = bundle.engine.int8_sessions, bundle._int8_plan
    assert route is not None and route.name == "optimized once" and plan is not None
    model = sdk.personalize(bundle, "rings", precision="int8")
    assert bundle.engine.int8_sessions is route and bundle._int8_plan is plan   # nothing made again
    fresh = sdk.load(tiny_bundle, providers=["CPUExecutionProvider"])
    assert sdk.personalize(fresh, "rings", precision="int8").int8_graph == model.int8_graph


def test_the_fusion_that_quantizes_as_it_fuses_writes_what_fusing_then_quantizing_writes(tiny_bundle, monkeypatch):
    """Both builds of the C kernel, every storage kind (the check the runtime runs at load), and a check that
    fails when the two differ; then the runtime: a tiny bundle's int8 graphs, every conv quantized by the
    fusion or once (a shared layer), are the bytes that fusing in floats and quantizing afterwards gives."""
    from sdk.fusion.native import NativeKernel, available_builds, check_quantizing_fusion, native_kernel

    kernel = native_kernel()
    if kernel is None or kernel._quantize is None:
        pytest.skip("the native kernel is not built here")
    for k in [kernel] + [NativeKernel(kernel._library, build=b) for b in available_builds(kernel._library)]:
        assert check_quantizing_fusion(k) is None
    wrong = NativeKernel(kernel._library)
    quantizing = wrong.quantizing
    monkeypatch.setattr(wrong, "quantizing", lambda plan, outputs, qmin, qmax: quantizing(plan, outputs, qmin, 127))
    assert "differs" in check_quantizing_fusion(wrong)
    monkeypatch.undo()

    bundle = sdk.load(tiny_bundle, providers=["CPUExecutionProvider"])
    descriptions = ("rings", "red disc, green stripes", "shapes")
    fused = [sdk.personalize(bundle, d, precision="int8").int8_graph for d in descriptions]
    prepared, quantized = bundle._int8_fusion
    assert prepared is not None and quantized == {w for w, _, _, _ in bundle._int8_plan.convs}
    assert quantized & bundle.engine.standard.mixed_weights()   # some by the fusion ...
    bundle._int8_fusion = (None, set())                        # ... now none: floats fused, then quantized
    assert [sdk.personalize(bundle, d, precision="int8").int8_graph for d in descriptions] == fused


def test_a_large_int8_graph_is_made_in_two_halves_at_once_as_one_session_computes_it(tiny_bundle, monkeypatch):
    """Above MIN_SPLIT_BYTES (lowered here: the tiny bundle is small) the optimized int8 graph is cut in two
    (sdk/engines/int8_session.py): a model's two sessions, made at once, give a fresh session's logits bit for bit,
    from many threads at once, and with another head (sdk.adapt's use); one thread or a small graph: whole."""
    from concurrent.futures import ThreadPoolExecutor

    from sdk.engines import int8_session
    from sdk.engines.int8_session import FreshInt8Sessions, choose_cut
    from sdk.format.onnx_proto import crossing_tensors

    monkeypatch.setattr(int8_session, "MIN_SPLIT_BYTES", 0)
    bundle = sdk.load(tiny_bundle, providers=["CPUExecutionProvider"])
    descriptions = ["rings", "red disc, green stripes", "shapes", "discs"] * 3
    with ThreadPoolExecutor(4) as pool:
        models = list(pool.map(lambda d: sdk.personalize(bundle, d, precision="int8"), descriptions))
    route = bundle.engine.int8_sessions
    assert route.name == "optimized once, in two halves" and route.crossing == crossing_tensors(route.optimized,
                                                                                                   route.cut)
    size = bundle.preprocessing.input_size
    image = np.random.default_rng(2).integers(0, 255, (3, size, size, 3), np.uint8)
    fresh = FreshInt8Sessions(["CPUExecutionProvider"], None)

    def expected(model, weight, bias):
        feeds = {"image": bundle.preprocessing.normalize(image), "head_weight": weight, "head_bias": bias}
        return fresh.open(model.int8_graph).run(None, feeds)[0]

    for model in models:
        assert np.array_equal(model.logits(list(image)), expected(model, model.head_weight, model.head_bias))
    other = models[0].network.with_head(models[1].head_weight, models[1].head_bias)
    assert np.array_equal(other.run(bundle.preprocessing.normalize(image)),
                          expected(models[0], models[1].head_weight, models[1].head_bias))
    one_thread = sdk.load(tiny_bundle, providers=["CPUExecutionProvider"], threads=1)
    assert sdk.personalize(one_thread, "rings", precision="int8").int8_graph == models[0].int8_graph
    assert one_thread.engine.int8_sessions.name == "optimized once"
    monkeypatch.undo()
    assert choose_cut(route.optimized) is None   # the tiny bundle's graph is below MIN_SPLIT_BYTES
