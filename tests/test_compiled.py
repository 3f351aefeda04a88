"""The device-compiled backbone route (sdk.compiled): how our weights are placed in onnxruntime's layout."""

import numpy as np

from sdk.compiled import _placement


def test_a_blocked_conv_reorder_is_found_as_a_transpose():
    shape = (16, 8, 3, 3)   # O, I, kh, kw -> (O/8)(I/8)hw(8i)(8o), as MLAS NCHWc with block 8
    order = np.arange(np.prod(shape)).reshape(2, 8, 1, 8, 3, 3).transpose(0, 2, 4, 5, 3, 1).reshape(-1)
    p = _placement("w", shape, np.arange(100, 100 + order.size), order)
    assert p.view is not None and p.index is None and p.start == 100
    source = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    dest = np.zeros(100 + order.size, np.float32)
    p.write(source, dest)
    assert np.array_equal(dest[100:], source.reshape(-1)[order])


def test_an_unknown_reorder_is_gathered_and_a_padded_one_rejected():
    shape = (4, 5)
    order = np.random.default_rng(1).permutation(20)
    p = _placement("w", shape, np.arange(20), order)
    assert p.index is not None
    source = np.arange(20, dtype=np.float32).reshape(shape) * 2
    dest = np.zeros(20, np.float32)
    p.write(source, dest)
    assert np.array_equal(dest, source.reshape(-1)[order])
    assert _placement("w", shape, np.arange(19), order[:19]) is None           # an element dropped
    assert _placement("w", shape, np.arange(20), np.r_[order[:19], order[0]]) is None  # one duplicated
