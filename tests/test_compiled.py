"""The device-compiled backbone route (sdk.engines.compiled): how our weights are placed in onnxruntime's layout."""

import numpy as np

from sdk.engines.compiled import _placement


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


def test_fusing_and_folding_in_tiles_equals_fusing_then_folding_then_reordering(tiny_bundle):
    import sdk
    from sdk.engines.compiled import compile_backbone
    from sdk.fusion.folding import BACKBONE_FILE, fold_batch_norm
    from sdk.fusion.plan import FusionPlan

    engine = sdk.load(tiny_bundle).engine
    compiled = compile_backbone(engine.graph, BACKBONE_FILE, engine.layout, engine.external_size)
    placements, floats = compiled.device_layout()
    plan = FusionPlan.build(engine.bases, placements, floats, tile_floats=64)
    assert sum(len(p.tiles) for p in plan.layers) > len(plan.layers)  # convs split over several tiles
    assert any(p.view is not None for p in placements.values())  # and some in a blocked layout
    alpha = np.random.default_rng(3).dirichlet(np.ones(engine.bases.num_bases), 4).astype(np.float32)
    mixed = engine.bases.mixed(alpha)
    _, plain = engine.plain_weight_file()
    fold_batch_norm(mixed, plain)
    tiled = plan.new_buffer(owner=None)
    plan.fuse_and_fold(alpha, tiled)
    for name, p in placements.items():
        assert plain[name].any()
        got = p.view_of(tiled.graph_data).reshape(plain[name].shape)  # view_of splits blocked channels
        np.testing.assert_allclose(got, plain[name], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(tiled.head[0], mixed["fc.weight"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(tiled.head[1], mixed["fc.bias"], rtol=1e-6, atol=1e-7)


def test_an_unknown_reorder_a_padded_or_a_duplicating_one_is_rejected():
    shape = (4, 5)
    order = np.random.default_rng(1).permutation(20)
    assert _placement("w", shape, np.arange(20), order) is None                # no known transpose
    assert _placement("w", shape, np.arange(20), np.arange(20)) is not None    # as is
    assert _placement("w", shape, np.arange(19), np.arange(19)) is None        # an element dropped
    assert _placement("w", shape, np.arange(20), np.r_[np.arange(19), 0]) is None  # one duplicated


def test_the_compiled_graph_takes_every_folded_weight_as_an_aligned_input(tiny_bundle):
    import sdk

    b = sdk.load(tiny_bundle).warm_up()
    assert b.engine.route == "compiled"
    route = b.engine.current
    session_inputs = {i.name: tuple(i.shape) for i in route.session.get_inputs()}
    folded = {name for name, _ in route.compiled.inputs.values()}
    assert set(session_inputs) == {"image", "head_weight", "head_bias"} | folded
    model = sdk.personalize(b, "round shapes")
    assert set(model.network.weights) == {"head_weight", "head_bias"} | folded
    for name in folded:
        array = model.network.weights[name]
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
    first, third = (next(iter(m.network.weights.values())) for m in (models[0], third))
    assert not np.shares_memory(first, third)
    assert np.array_equal(models[0].logits(np.zeros((2, 32, 32, 3), np.uint8)), before)
