"""sdk.format.onnx_proto: the runtime's own minimal protobuf edit, checked against the onnx package."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from sdk.format.onnx_proto import (
    ProtoError,
    append_linear_head,
    initializers,
    initializers_to_inputs,
    inline_external_data,
    inputs_to_initializers,
    split_graph,
    with_metadata,
)
from sdk.prototypes import l2_normalize


def small_model() -> bytes:
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4), "w")
    b = numpy_helper.from_array(np.array([1.0, -2.0, 3.0], np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_initializers_are_read_as_onnx_reads_them():
    model = onnx.load_from_string(small_model())
    onnx.external_data_helper.set_external_data(model.graph.initializer[0], "weights.bin", offset=64, length=48)
    got = initializers(model.SerializeToString())
    assert [(i.name, i.dims, i.data_type) for i in got] == [(t.name, tuple(t.dims), t.data_type)
                                                            for t in model.graph.initializer]
    assert got[0].external == {"location": "weights.bin", "offset": "64", "length": "48"}
    assert got[1].external == {}


def test_initializers_become_inputs_and_the_graph_still_computes_the_same():
    original = small_model()
    edited = initializers_to_inputs(original, ["w"])
    model = onnx.load_from_string(edited)
    onnx.checker.check_model(model)
    assert [t.name for t in model.graph.initializer] == ["b"]
    assert [(i.name, [d.dim_value for d in i.type.tensor_type.shape.dim]) for i in model.graph.input] == [
        ("x", [2, 4]), ("w", [3, 4])]
    assert model.graph.node == onnx.load_from_string(original).graph.node
    x = np.random.default_rng(0).standard_normal([2, 4]).astype(np.float32)
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    expected = ort.InferenceSession(original).run(None, {"x": x})[0]
    assert np.array_equal(ort.InferenceSession(edited).run(None, {"x": x, "w": w})[0], expected)


def test_a_linear_head_is_appended_with_its_rows_as_inputs_of_any_count():
    edited = append_linear_head(small_model(), "y", 3, "head_weight", "head_bias", "logits")
    model = onnx.load_from_string(edited)
    onnx.checker.check_model(model, full_check=True)  # including shape inference
    assert [o.name for o in model.graph.output] == ["logits"]
    assert [i.name for i in model.graph.input] == ["x", "head_weight", "head_bias"]
    session = ort.InferenceSession(edited)
    rng = np.random.default_rng(1)
    x = rng.standard_normal([2, 4]).astype(np.float32)
    y = ort.InferenceSession(small_model()).run(None, {"x": x})[0]
    for classes in (1, 5):
        w, b = rng.standard_normal([classes, 3]).astype(np.float32), rng.standard_normal(classes).astype(np.float32)
        got = session.run(None, {"x": x, "head_weight": w, "head_bias": b})[0]
        np.testing.assert_allclose(got, y @ w.T + b, rtol=1e-5, atol=1e-5)
    with pytest.raises(ProtoError, match="output"):
        append_linear_head(small_model(), "features", 3, "head_weight", "head_bias", "logits")


def test_a_cosine_head_normalises_the_features_as_the_runtime_does_and_zero_features_stay_finite():
    relu = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])]), opset_imports=[helper.make_opsetid("", 17)])
    relu.ir_version = 8
    edited = append_linear_head(relu.SerializeToString(), "y", 4, "head_weight", "head_bias", "logits",
                                unit_features=True)
    onnx.checker.check_model(onnx.load_from_string(edited), full_check=True)
    rng = np.random.default_rng(2)
    x = rng.standard_normal([3, 4]).astype(np.float32)
    x[2] = -1  # all features zero after the ReLU: the logits are the bias, as in l2_normalize
    w, b = rng.standard_normal([5, 4]).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    got = ort.InferenceSession(edited).run(None, {"x": x, "head_weight": w, "head_bias": b})[0]
    np.testing.assert_allclose(got, l2_normalize(np.maximum(x, 0)) @ w.T + b, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[2], b)


def test_a_standalone_model_carries_its_weights_head_and_metadata():
    model = onnx.load_from_string(small_model())
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    external = np.concatenate([np.full(16, 7, np.float32), w.ravel()])  # w at byte 64 of the weight file
    onnx.external_data_helper.set_external_data(model.graph.initializer[0], "weights.bin", offset=64, length=48)
    model.graph.initializer[0].data_location = onnx.TensorProto.EXTERNAL
    model.graph.initializer[0].ClearField("raw_data")
    headed = append_linear_head(model.SerializeToString(), "y", 3, "hw", "hb", "logits")
    hw, hb = np.ones([2, 3], np.float32), np.array([0.5, -0.5], np.float32)
    standalone = with_metadata(inline_external_data(
        inputs_to_initializers(headed, {"hw": (hw.shape, hw.tobytes()), "hb": (hb.shape, hb.tobytes())}),
        "weights.bin", external.view(np.uint8)), {"classes": "[\"a\", \"b\"]"})
    loaded = onnx.load_from_string(standalone)
    onnx.checker.check_model(loaded, full_check=True)
    assert not any(t.external_data for t in loaded.graph.initializer)
    assert [i.name for i in loaded.graph.input] == ["x"]
    assert {p.key: p.value for p in loaded.metadata_props} == {"classes": '["a", "b"]'}
    x = np.random.default_rng(3).standard_normal([2, 4]).astype(np.float32)
    y = ort.InferenceSession(small_model()).run(None, {"x": x})[0]
    np.testing.assert_allclose(ort.InferenceSession(standalone).run(None, {"x": x})[0], y @ hw.T + hb, rtol=1e-5)
    for short in (external[:20], external[:-1]):  # the file ends before the tensor does
        with pytest.raises(ProtoError, match="bytes at 64"):
            inline_external_data(headed, "weights.bin", short.view(np.uint8))
    with pytest.raises(ProtoError, match="not inputs"):
        inputs_to_initializers(headed, {"x2": ((1,), b"\0" * 4)})
    with pytest.raises(ProtoError, match="bytes for float32"):
        inputs_to_initializers(headed, {"hb": ((3,), hb.tobytes())})


def test_unknown_names_and_damaged_bytes_raise_proto_error():
    model = small_model()
    with pytest.raises(ProtoError):
        initializers_to_inputs(model, ["no such tensor"])
    rng = np.random.default_rng(0)
    damaged = [model[:cut] for cut in range(1, len(model))]  # cut short anywhere
    for _ in range(500):  # a few bytes overwritten
        raw = bytearray(model)
        for i in rng.integers(len(raw), size=3):
            raw[i] = int(rng.integers(256))
        damaged.append(bytes(raw))
    for data in damaged:  # may still parse (a cut at a field boundary), but fails only with ProtoError
        for edit in (lambda d: initializers_to_inputs(d, ["w"]),
                     lambda d: append_linear_head(d, "y", 3, "head_weight", "head_bias", "logits", True),
                     lambda d: inline_external_data(d, "weights.bin", bytes(64)),
                     lambda d: inputs_to_initializers(d, {"x": ((2, 4), bytes(32))})):
            try:
                edit(data)
            except ProtoError:
                pass


def test_a_graph_cut_in_two_computes_in_turn_what_it_computes_whole():
    """x -> Relu -> a; Add(a, c1) -> b; Mul(b, a) -> y (with a second graph input): cut after each of the
    first two nodes, the halves run in turn give the whole graph's y; each half keeps only the initializers
    and inputs its nodes read; a cut that leaves nothing after it, or after a graph output, is refused."""
    c1 = numpy_helper.from_array(np.full((2, 3), 0.5, np.float32), "c1")
    unused = numpy_helper.from_array(np.ones(4, np.float32), "unused")
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Add", ["a", "c1"], ["b"]),
         helper.make_node("Mul", ["b", "a"], ["m"]), helper.make_node("Add", ["m", "z"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [c1, unused])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    whole = model.SerializeToString()
    feeds = {"x": np.array([[-1.0, 2.0, 3.0], [0.5, -4.0, 1.0]], np.float32), "z": np.ones((2, 3), np.float32)}
    want = ort.InferenceSession(whole, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    for cut, crossing in ((1, ["a"]), (2, ["a", "b"])):
        first, second, names = split_graph(whole, cut, TensorProto.FLOAT)
        assert names == crossing
        assert [i.name for i in initializers(first)] == (["c1"] if cut == 2 else [])
        assert [i.name for i in initializers(second)] == ([] if cut == 2 else ["c1"])
        a = ort.InferenceSession(first, providers=["CPUExecutionProvider"])
        b = ort.InferenceSession(second, providers=["CPUExecutionProvider"])
        assert [i.name for i in a.get_inputs()] == ["x"] and {i.name for i in b.get_inputs()} == {"z", *crossing}
        middle = dict(zip(names, a.run(names, {"x": feeds["x"]}), strict=True))
        assert np.array_equal(b.run(None, {**middle, "z": feeds["z"]})[0], want)
    for cut in (0, 4):
        with pytest.raises(ProtoError, match="no cut"):
            split_graph(whole, cut, TensorProto.FLOAT)
    made_early = helper.make_model(helper.make_graph(
        list(graph.node), "g", list(graph.input), [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3])],
        [c1]), opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ProtoError, match="cannot be cut"):
        split_graph(made_early.SerializeToString(), 2, TensorProto.FLOAT)
