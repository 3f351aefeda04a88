"""sdk.onnx_proto: the runtime's own minimal protobuf edit, checked against the onnx package."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from sdk.onnx_proto import ProtoError, append_linear_head, initializers, initializers_to_inputs


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
                     lambda d: append_linear_head(d, "y", 3, "head_weight", "head_bias", "logits")):
            try:
                edit(data)
            except ProtoError:
                pass
