import json

import numpy as np
import onnxruntime as ort
import pytest

import sdk
from sdk.errors import SdkError


@pytest.fixture(scope="module")
def model(tiny_bundle):
    return sdk.personalize(sdk.load(tiny_bundle), "round shapes")


@pytest.fixture(scope="module")
def images():
    return np.random.default_rng(0).integers(0, 255, (3, 32, 32, 3), dtype=np.uint8)


def test_onnx_export_matches_the_runtime_and_carries_classes(model, images, tmp_path):
    path = model.export(tmp_path / "shapes.onnx")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (logits,) = session.run(None, {"image": model.preprocessing.normalize(images)})
    assert np.abs(logits - model.logits(images)).max() < 1e-4
    meta = session.get_modelmeta().custom_metadata_map
    assert json.loads(meta["classes"]) == model.classes
    assert json.loads(meta["preprocessing"])["input_size"] == 32
    assert [p.name for p in tmp_path.iterdir()] == ["shapes.onnx"]  # no temp files left


def test_executorch_export_matches_the_runtime(model, images, tmp_path):
    torch = pytest.importorskip("torch")
    from executorch.runtime import Runtime

    path = model.export(tmp_path / "shapes.pte")
    method = Runtime.get().load_program(path).load_method("forward")
    out = np.concatenate([method.execute([torch.from_numpy(model.preprocessing.normalize(images[i:i + 1]))])[0]
                          .numpy() for i in range(len(images))])
    assert np.abs(out - model.logits(images)).max() < 1e-4
    sidecar = json.loads((tmp_path / "shapes.pte.json").read_text())
    assert sidecar["classes"] == model.classes and sidecar["preprocessing"]["mean"][0] == pytest.approx(0.485)


def test_coreml_conversion_has_names_shapes_and_labels(model, tmp_path):
    # Core ML prediction needs macOS; on Linux the conversion runs and its spec is checked.
    ct = pytest.importorskip("coremltools")
    path = model.export(tmp_path / "shapes.mlpackage")
    spec = ct.utils.load_spec(str(path))
    assert spec.description.input[0].name == "image"
    assert list(spec.description.input[0].type.multiArrayType.shape) == [1, 3, 32, 32]
    assert spec.description.predictedFeatureName == "classLabel"
    meta = dict(spec.description.metadata.userDefined)
    assert json.loads(meta["classes"]) == model.classes and "preprocessing" in meta
    labels = [o for o in spec.description.output if o.name == "classLabel_probs"]
    assert labels and labels[0].type.WhichOneof("Type") == "dictionaryType"


def test_unknown_format_is_refused(model, tmp_path):
    with pytest.raises(SdkError, match="use one of"):
        model.export(tmp_path / "shapes.tflite")
    assert list(tmp_path.iterdir()) == []
