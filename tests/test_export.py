import json
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest

import sdk
from sdk.errors import SdkError


@pytest.fixture(scope="module", params=["round shapes", "green stripes"])
def model(tiny_bundle, request):
    """A model of several classes, and of one (its answers: it or anything else, sdk.engines.rest)."""
    model = sdk.personalize(sdk.load(tiny_bundle), request.param)
    assert model.rest == (request.param == "green stripes")
    return model


@pytest.fixture(scope="module")
def images():
    return np.random.default_rng(0).integers(0, 255, (3, 32, 32, 3), dtype=np.uint8)


def test_onnx_export_matches_the_runtime_and_carries_classes_and_the_recipe(model, images, tmp_path):
    onnx = pytest.importorskip("onnx")
    path = model.export(tmp_path / "shapes.onnx")
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)  # one file: the weights are inline
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (logits,) = session.run(None, {"image": model.preprocessing.normalize(images)})
    assert np.abs(logits - model.logits(images)).max() < 1e-4
    meta = session.get_modelmeta().custom_metadata_map
    assert json.loads(meta["classes"]) == model.classes and meta["head"] == "linear"
    recipe = json.loads(meta["preprocessing"])
    assert recipe["input_size"] == 32 and recipe["scale"] == pytest.approx(1 / 255)
    assert (recipe["layout"], recipe["channel_order"], recipe["resize_filter"]) == ("NCHW", "RGB", "bilinear")
    assert [p.name for p in tmp_path.iterdir()] == ["shapes.onnx"]  # no temp files left


def test_the_onnx_export_needs_neither_torch_nor_onnx(tiny_bundle, tmp_path):
    out = tmp_path / "plain.onnx"
    code = ("import sys; sys.modules['torch'] = None; sys.modules['onnx'] = None; import sdk; "
            f"sdk.personalize(sdk.load({str(tiny_bundle)!r}), 'round shapes').export({str(out)!r}); "
            "bad = [m for m in ('torch', 'export', 'onnx') if sys.modules.get(m)]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).get_outputs()[0].name == "logits"


def test_executorch_export_matches_the_runtime_on_batches(model, images, tmp_path):
    torch = pytest.importorskip("torch")
    from executorch.runtime import Runtime

    from sdk.exports import MAX_PTE_BATCH

    if model.rest:   # 17 s more; its torch network (export.personalized) is the Core ML test's, checked there
        pytest.skip("the model of one class's network is checked by the Core ML test")
    path = model.export(tmp_path / "shapes.pte")
    method = Runtime.get().load_program(path).load_method("forward")
    many = np.concatenate([images] * 3)[:MAX_PTE_BATCH]
    for batch in (images[:1], images, many):  # one image, a few, the largest batch
        out = method.execute([torch.from_numpy(model.preprocessing.normalize(batch))])[0].numpy()
        assert out.shape == (len(batch), len(model.classes))
        assert np.abs(out - model.logits(batch)).max() < 1e-4
    sidecar = json.loads((tmp_path / "shapes.pte.json").read_text())
    assert sidecar["classes"] == model.classes and sidecar["max_batch"] == MAX_PTE_BATCH
    assert sidecar["preprocessing"]["mean"][0] == pytest.approx(0.485) and sidecar["preprocessing"]["layout"] == "NCHW"


def test_coreml_takes_an_rgb_image_and_normalises_it_itself(model, images, tmp_path):
    # Core ML prediction needs macOS; on Linux the conversion runs, its spec is checked, and the network it
    # converts is run in torch on pixels / 255 (what the ImageType's scale feeds it).
    ct = pytest.importorskip("coremltools")
    import torch

    from export.personalized import coreml_network

    path = model.export(tmp_path / "shapes.mlpackage")
    spec = ct.utils.load_spec(str(path))
    image = spec.description.input[0]
    assert image.name == "image" and image.type.WhichOneof("Type") == "imageType"
    assert (image.type.imageType.width, image.type.imageType.height) == (32, 32)
    assert image.type.imageType.colorSpace == ct.proto.FeatureTypes_pb2.ImageFeatureType.RGB
    main = spec.mlProgram.functions["main"]
    operations = main.block_specializations[main.opset].operations
    first = next(op for op in operations if op.type != "const")
    assert first.type == "mul" and first.inputs["x"].arguments[0].name == "image"  # the 1/255 scale
    assert spec.description.predictedFeatureName == "classLabel"
    meta = dict(spec.description.metadata.userDefined)
    assert json.loads(meta["classes"]) == model.classes and meta["precision"] == "float16"
    assert "image" in json.loads(meta["preprocessing"])["input"]
    labels = [o for o in spec.description.output if o.name == "classLabel_probs"]
    assert labels and labels[0].type.WhichOneof("Type") == "dictionaryType"
    pixels = torch.from_numpy(images.transpose(0, 3, 1, 2).astype(np.float32) / 255)
    with torch.no_grad():
        probabilities = coreml_network(model)(pixels).numpy()
    np.testing.assert_allclose(probabilities, model.predict_proba(images), atol=1e-5)


def test_unknown_format_is_refused(model, tmp_path):
    with pytest.raises(SdkError, match="use one of"):
        model.export(tmp_path / "shapes.tflite")
    assert list(tmp_path.iterdir()) == []
