"""The device-compiled backbone route (sdk.compiled): how our weights are placed in onnxruntime's layout."""

import numpy as np

from sdk.compiled import _placement
from sdk.folding import fold_batch_norm


def blocked_order(shape):  # O, I, kh, kw -> (O/8)(I/8)hw(8i)(8o), as MLAS NCHWc with block 8
    o, i, kh, kw = shape
    return np.arange(np.prod(shape)).reshape(o // 8, 8, i // 8, 8, kh, kw).transpose(0, 2, 4, 5, 3, 1).reshape(-1)


def test_a_blocked_conv_reorder_is_found_as_a_transpose_and_written_through_a_view():
    shape = (16, 8, 3, 3)
    order = blocked_order(shape)
    p = _placement("w", shape, np.arange(100, 100 + order.size), order)
    assert p.view is not None and p.start == 100
    source = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    dest = np.zeros(100 + order.size, np.float32)
    view = p.view_of(dest)
    view[...] = source.reshape(view.shape)
    assert np.array_equal(dest[100:], source.reshape(-1)[order]) and not dest[:100].any()


def test_folding_into_the_blocked_layout_equals_folding_then_reordering():
    rng = np.random.default_rng(1)
    shape = (16, 16, 3, 3)
    weights = {"stem.conv1.weight": rng.standard_normal(shape).astype(np.float32),
               "stem.bn1.weight": rng.uniform(0.5, 2, 16).astype(np.float32),
               "stem.bn1.bias": rng.standard_normal(16).astype(np.float32),
               "stem.bn1.running_mean": rng.standard_normal(16).astype(np.float32),
               "stem.bn1.running_var": rng.uniform(0.5, 2, 16).astype(np.float32)}
    plain = {"stem.conv1.weight": np.zeros(shape, np.float32), "stem.conv1.bias": np.zeros(16, np.float32)}
    fold_batch_norm(weights, plain)
    assert plain["stem.conv1.bias"].any()  # the pair was folded
    n = 16 * 16 * 9
    weight = _placement("stem.conv1.weight", shape, np.arange(n), blocked_order(shape))
    bias = _placement("stem.conv1.bias", (16,), np.arange(n, n + 16), np.arange(16))
    dest = np.zeros(n + 16, np.float32)
    fold_batch_norm(weights, {"stem.conv1.weight": weight.view_of(dest), "stem.conv1.bias": bias.view_of(dest)})
    assert np.array_equal(dest[:n], plain["stem.conv1.weight"].reshape(-1)[blocked_order(shape)])
    assert np.array_equal(dest[n:], plain["stem.conv1.bias"])


def test_an_unknown_reorder_a_padded_or_a_duplicating_one_is_rejected():
    shape = (4, 5)
    order = np.random.default_rng(1).permutation(20)
    assert _placement("w", shape, np.arange(20), order) is None                # no known transpose
    assert _placement("w", shape, np.arange(20), np.arange(20)) is not None    # as is
    assert _placement("w", shape, np.arange(19), np.arange(19)) is None        # an element dropped
    assert _placement("w", shape, np.arange(20), np.r_[np.arange(19), 0]) is None  # one duplicated


def test_folding_in_place_in_the_blocked_layout_equals_folding_then_reordering():
    rng = np.random.default_rng(2)
    shape = (16, 16, 3, 3)
    bn = {"stem.bn1.weight": rng.uniform(0.5, 2, 16), "stem.bn1.bias": rng.standard_normal(16),
          "stem.bn1.running_mean": rng.standard_normal(16), "stem.bn1.running_var": rng.uniform(0.5, 2, 16)}
    weights = {"stem.conv1.weight": rng.standard_normal(shape), **bn}
    weights = {k: v.astype(np.float32) for k, v in weights.items()}
    plain = {"stem.conv1.weight": np.zeros(shape, np.float32), "stem.conv1.bias": np.zeros(16, np.float32)}
    fold_batch_norm(weights, plain)
    assert plain["stem.conv1.bias"].any()  # the pair was folded
    n = 16 * 16 * 9
    dest = np.zeros(n + 16, np.float32)
    view = _placement("stem.conv1.weight", shape, np.arange(n), blocked_order(shape)).view_of(dest)
    view[...] = weights["stem.conv1.weight"].reshape(view.shape)  # fused straight into the blocked layout
    bias = dest[n:]
    fold_batch_norm({**weights, "stem.conv1.weight": view}, {"stem.conv1.weight": view, "stem.conv1.bias": bias})
    assert np.array_equal(dest[:n], plain["stem.conv1.weight"].reshape(-1)[blocked_order(shape)])
    assert np.array_equal(bias, plain["stem.conv1.bias"])


def test_the_compiled_graph_takes_every_folded_weight_as_an_aligned_input(tiny_bundle):
    import sdk

    b = sdk.load(tiny_bundle).warm_up()
    assert b.engine.route == "compiled"
    device = b.engine.device
    session_inputs = {i.name: tuple(i.shape) for i in b.engine.shared_session.get_inputs()}
    assert set(session_inputs) == {"image"} | {name for name, _ in device.inputs.values()}
    model = sdk.personalize(b, "round shapes")
    for name, array in model.backbone.weights.items():
        assert tuple(array.shape) == session_inputs[name]
        assert array.ctypes.data % 64 == 0 and array.flags.c_contiguous


def test_a_freed_models_weights_go_back_to_the_pool_and_a_live_models_are_not_reused(tiny_bundle):
    import sdk

    b = sdk.load(tiny_bundle).warm_up()
    pool = b.engine._buffers
    models = [sdk.personalize(b, d) for d in ("round shapes", "blue")]
    assert pool.qsize() == 0  # both buffers are held by their models
    before = models[0].logits(np.zeros((2, 32, 32, 3), np.uint8))
    del models[1]
    assert pool.qsize() == 1
    third = sdk.personalize(b, "textures")
    assert pool.qsize() == 0  # it took the freed buffer
    first, third = (next(iter(m.backbone.weights.values())) for m in (models[0], third))
    assert not np.shares_memory(first, third)
    assert np.array_equal(models[0].logits(np.zeros((2, 32, 32, 3), np.uint8)), before)
