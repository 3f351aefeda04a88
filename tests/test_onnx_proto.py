"""sdk.onnx_proto: the runtime's own minimal protobuf edit, checked against the onnx package."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from sdk.onnx_proto import ProtoError, initializers, initializers_to_inputs


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
        try:
            initializers_to_inputs(data, ["w"])
        except ProtoError:
            pass
