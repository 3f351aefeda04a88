"""The fusion kernels (sdk.fusion.plan, sdk.fusion.native) against the reference (dequantize, sum, fold), for
every storage kind, in the plain layout and in blocked NCHWc layouts, with tiles that split layers and
layers split over threads."""

import functools
import logging

import numpy as np
import pytest

from export.compress import Mode, compress
from sdk.fusion.architecture import parameter_shapes
from sdk.fusion.bases import CompactBases
from sdk.fusion.folding import backbone_layout, fold_batch_norm, folded_names
from sdk.fusion.native import NativeKernel, available_builds, native_kernel, packed_placements, self_check
from sdk.fusion.plan import NUMPY, FusionPlan, Placement

SHAPES = parameter_shapes("small", 0.25, 12)
MODES = ["fp32", "fp16", "delta", "delta+fp16", "int8", "int8+fp16", "lowrank:3", "lowrank:3+fp16",
         "drop:0.9+lowrank:2", "subspace:3", "subspace:5+fp16",
         "lowrank:17"]   # 4 x 17 = 68 left-factor columns: more than the C kernel holds at once (64)


def trained_like(seed=0):
    """Random bases that are near-copies (W_0 plus 5% deltas), with one layer made identical across bases."""
    rng = np.random.default_rng(seed)
    full = CompactBases.random(SHAPES, num_bases=4, seed=seed)
    for lb in full.layers:
        w = lb.parts["weight"]
        w[...] = w[:1] + 0.05 * rng.standard_normal(w.shape).astype(np.float32) * (lb.layer.name != "layer2.1.conv1")
        if lb.layer.name == "layer2.1.conv1":
            lb.parts["channels"][...] = lb.parts["channels"][:1]
    return full


def plain_placements():
    layout, size = backbone_layout(SHAPES)
    return {n: Placement(n, tuple(e["shape"]), e["offset"] // 4) for n, e in layout.items()}, size // 4


def reference(bases, alpha):
    mixed = bases.mixed(alpha)
    folded = {n: np.zeros(s, np.float32) for n, s in folded_names(SHAPES).items()}
    fold_batch_norm(mixed, folded)
    return mixed, folded


@functools.cache
def compressed(mode):
    return compress(trained_like(), Mode.parse(mode))


@functools.cache
def kernel_named(name):
    """numpy; the C kernel as the engine gets it; the C kernel splitting every layer over 2 threads; the C
    kernel's baseline-ISA build and its AVX2 build (on x86 with AVX-512 the engine gets a third one; the AVX2
    build is what an AVX2-only CPU runs)."""
    if name == "native-threads":
        return NativeKernel(native_kernel()._library, threads=2, split_bytes=64)
    if name in ("native-baseline", "native-avx2"):
        build = name.split("-")[1]
        if build not in available_builds(native_kernel()._library):
            pytest.skip(f"this CPU cannot run the {build} build")
        return NativeKernel(native_kernel()._library, build=build)
    return NUMPY if name == "numpy" else native_kernel()


def layout_named(name):
    """The plain layout; every conv that can be blocked by 8 (or 16) in NCHWc; or every conv weight
    channels-last, [O, H, W, I] (ExecuTorch's XNNPACK program)."""
    if name == "channels_last":
        placements, floats = plain_placements()
        return {n: Placement(n, p.shape, p.start, (p.shape, (0, 2, 3, 1)) if len(p.shape) == 4 else None)
                for n, p in placements.items()}, floats
    return plain_placements() if name == "plain" else packed_placements(SHAPES, 16 if name == "blocked16" else 8)


def test_the_native_kernel_is_built_and_passes_its_self_check():
    kernel = native_kernel()   # `make setup` builds it (pyproject's ext-modules); None means numpy fuses
    assert kernel is not None and self_check(kernel) is None
    assert self_check(kernel_named("native-baseline")) is None
    if "avx2" in available_builds(kernel._library):
        assert self_check(kernel_named("native-avx2")) is None


@pytest.mark.parametrize("kernel", ["native", "native-baseline", "native-avx2"])
def test_the_native_kernel_widens_every_float16_value_exactly(kernel):
    """All 65,536 half-precision bit patterns as W_0 of one plain layer (zeros, subnormals, inf, NaN): the
    kernel's conversion (integer operations in the baseline build, F16C in the AVX2 one) gives numpy's
    float32 values."""
    from sdk.fusion.native import TYPES, _Layer

    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    out = np.full(halves.size, 7.0, np.float32)
    alpha = np.ones((4, 1), np.float32)
    layer = _Layer(0, 0, 1, halves.size, 1, 0, None, 0, 0, None, 0, None, halves.ctypes.data, TYPES[halves.dtype])
    kernel_named(kernel)._call((_Layer * 1)(layer), alpha, out, 0, 1, np.empty(1, np.float32))
    np.testing.assert_array_equal(out, halves.astype(np.float32))   # NaN == NaN here; -0 == +0
    signed = np.isfinite(halves) & (halves != 0)   # -0 is 0 + (-0) = +0 after the sum, as in numpy
    assert np.array_equal(np.signbit(out[signed]), np.signbit(halves[signed]))


@pytest.mark.parametrize("kernel", ["numpy", "native", "native-threads", "native-baseline", "native-avx2"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layout", ["plain", "blocked", "blocked16", "channels_last"])
def test_fusing_any_storage_into_any_layout_equals_the_reference(mode, layout, kernel):
    bases = compressed(mode)
    placements, floats = layout_named(layout)
    assert layout == "plain" or any(p.view is not None for p in placements.values())
    whole_layers = layout in ("plain", "channels_last") or kernel == "native-threads"   # else 100-float tiles
    plan = FusionPlan.build(bases, placements, floats, kernel_named(kernel), tile_floats=None if whole_layers else 100)
    alpha = np.random.default_rng(1).dirichlet(np.ones(4), 4).astype(np.float32)
    target = plan.new_buffer(owner=None)
    for _ in range(2):  # a reused buffer gives the same weights (shared layers are written once)
        plan.fuse_and_fold(alpha, target)
        mixed, folded = reference(bases, alpha)
        for name, p in placements.items():
            got = p.view_of(target.graph_data).reshape(folded[name].shape)  # a blocked view splits channels
            np.testing.assert_allclose(got, folded[name], rtol=2e-5, atol=2e-6, err_msg=name)
        np.testing.assert_allclose(target.head[0], mixed["fc.weight"], rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(target.head[1], mixed["fc.bias"], rtol=2e-5, atol=2e-6)


def test_tiles_split_layers_and_shared_layers_are_not_fused_again():
    bases = compress(trained_like(), Mode.parse("drop:0.01+delta"))
    shared = {lb.layer.name for lb in bases.layers if lb.kind == "shared"}
    assert shared == {"layer2.1.conv1"}
    placements, floats = packed_placements(SHAPES, 8)
    plan = FusionPlan.build(bases, placements, floats, tile_floats=100)
    assert "layer2.1.conv1" not in {p.layer.name for p in plan.layers}
    assert max(len(p.tiles) for p in plan.layers) > 1
    target = plan.new_buffer(owner=None)
    weight = placements["layer2.1.conv1.weight"].view_of(target.graph_data)
    before = weight.copy()
    assert before.any()
    plan.fuse_and_fold(np.full((4, 4), 0.25, np.float32), target)
    assert np.array_equal(weight, before)


def test_mixing_delta_storage_in_float32_is_exactly_the_plain_mix():
    full = trained_like()
    alpha = np.random.default_rng(2).dirichlet(np.ones(4), 4).astype(np.float32)
    a, b = full.mixed(alpha), compress(full, Mode.parse("delta")).mixed(alpha)
    for name in a:
        np.testing.assert_allclose(b[name], a[name], rtol=1e-5, atol=1e-6)


def test_lossy_modes_are_close_and_low_rank_error_falls_with_rank():
    full = trained_like()
    alpha = np.random.default_rng(3).dirichlet(np.ones(4), 4).astype(np.float32)
    exact = full.mixed(alpha)["layer3.0.conv2.weight"]

    def error(mode):
        got = compress(full, Mode.parse(mode)).mixed(alpha)["layer3.0.conv2.weight"]
        return float(np.abs(got - exact).max())

    assert error("fp16") < 1e-3 and error("int8") < 2e-3
    assert error("lowrank:64") < 1e-5 < error("lowrank:16") < error("lowrank:2")
    # subspace ranks stop at min(O, n) (here O = 64 < Q O): never exact, but better with rank
    assert error("subspace:64") < error("subspace:16") < error("subspace:2")


@pytest.mark.parametrize("text", ["", "fp32+fp16", "int8+lowrank:4", "lowrank:0", "lowrank:x", "drop:1.5", "zip",
                                  "lowrank:2+subspace:2", "subspace:"])
def test_bad_modes_are_refused(text):
    with pytest.raises(ValueError):
        Mode.parse(text)


def test_a_declined_compiled_route_says_why_at_debug_level(tiny_bundle, caplog, monkeypatch):
    import sdk
    from sdk.engines import onnxruntime as engine

    def declined(*args):
        raise engine.CompileDeclined("test reason")

    monkeypatch.setattr(engine, "compile_backbone", declined)
    with caplog.at_level(logging.DEBUG, logger="sdk.engines.onnxruntime"):
        b = sdk.load(tiny_bundle).warm_up()
    assert b.engine.route == "standard"
    assert "compiled route declined: test reason" in caplog.text


def test_a_broken_native_kernel_is_declined_and_numpy_fuses(monkeypatch, caplog):
    from sdk.fusion import native as native_fusion
    from sdk.fusion.native import layer_array

    kernel = NativeKernel(native_kernel()._library)
    real = kernel._call

    def blocked_layers_skipped(layers, *args):   # a kernel that gets the NCHWc layouts wrong
        plain = [layer for layer in layers if layer.block == 1]
        real(layer_array(len(plain))(*plain), *args)

    monkeypatch.setattr(kernel, "_call", blocked_layers_skipped)
    assert "block 8: differs from numpy" in self_check(kernel)
    monkeypatch.setattr(native_fusion, "_loaded", [])
    monkeypatch.setattr(native_fusion, "NativeKernel", lambda library: kernel)
    with caplog.at_level(logging.DEBUG, logger="sdk.fusion.native"):
        assert native_fusion.native_kernel() is None
    assert "native fusion declined" in caplog.text


def test_taper_fusion_numpy_turns_the_native_kernel_off(monkeypatch, caplog):
    from sdk.fusion import native as native_fusion

    monkeypatch.setattr(native_fusion, "_loaded", [])
    monkeypatch.setenv("TAPER_FUSION", "numpy")
    with caplog.at_level(logging.DEBUG, logger="sdk.fusion.native"):
        assert native_fusion.native_kernel() is None
    assert "TAPER_FUSION=numpy" in caplog.text
