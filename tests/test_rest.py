"""A task of one class: its model answers the class or "anything else" (sdk.engines.rest; issue 72, padding; the
measurement behind it: lab/one_class.py, docs/results/one_class.json)."""

import numpy as np
import onnxruntime as ort
import pytest

import sdk
from sdk.adapt import AdaptRule
from sdk.batches import run_in_batches
from sdk.engines.rest import REST_LABEL, collapse, one_against_rest, rest_head


@pytest.fixture(scope="module")
def images():
    return np.random.default_rng(3).integers(0, 255, (6, 32, 32, 3), dtype=np.uint8)


def every_class_logits(model, images) -> np.ndarray:
    """The same network with every class's row, in the bundle's order."""
    network = model.network.with_head(*model.source.mixed_head(model.alpha))
    return run_in_batches(network, images, model.preprocessing)


def test_one_class_answers_it_or_anything_else_from_every_class_logit(tiny_sdk, images):
    model = tiny_sdk.personalize("green stripes")
    x = tiny_sdk.classes.index("green stripes")
    assert model.rest and model.classes == ["green stripes", REST_LABEL] and model.class_ids[1] == ""
    assert model.class_indices.tolist() == [x, -1] and len(model.head_bias) == len(tiny_sdk.classes)
    others = len(tiny_sdk.classes) - 1
    assert model.resolution[-1] == f"one class: 'green stripes', or {REST_LABEL} (the bundle's {others} other classes)"
    z = every_class_logits(model, images)
    assert np.abs(model.logits(images) - one_against_rest(z, x)).max() < 1e-4
    # P(X): the full classifier's, with X's prior even against all the others together
    p = np.exp(z[:, x]) / (np.exp(z[:, x]) + np.exp(np.delete(z, x, axis=1)).mean(axis=1))
    assert np.abs(model.predict_proba(images)[:, 0] - p).max() < 1e-5
    labels = {label for label, _ in model.predict(images)}
    assert labels <= {"green stripes", REST_LABEL}


def test_the_rows_and_the_collapse_are_one_against_the_rest():
    weight, bias = np.arange(8, dtype=np.float32).reshape(4, 2), np.array([0, 1, 2, 3], np.float32)
    rows, shifted = rest_head(weight, bias, 2)
    assert rows.tolist() == [[4, 5], [0, 1], [2, 3], [6, 7]]
    assert np.allclose(shifted, [2, 0 - np.log(3), 1 - np.log(3), 3 - np.log(3)])
    z = np.array([[1.0, 5.0, 5.0, 5.0]], np.float32)
    assert np.allclose(collapse(z), [[1.0, 5.0 + np.log(3)]])        # three equal others: each, plus log 3
    assert collapse(np.array([[0.0, 1000.0, 1000.0]], np.float32))[0, 1] == pytest.approx(1000 + np.log(2))


def test_min_classes_2_pads_as_before(tiny_sdk):
    model = tiny_sdk.personalize("green stripes", sdk.TaskOptions(min_classes=2))
    assert not model.rest and len(model.classes) == 2 and REST_LABEL not in model.classes
    assert "added" in model.resolution[-1]


def test_int8_one_class_runs_and_exports_the_same_scores(tiny_sdk, images, tmp_path):
    model = tiny_sdk.personalize("green stripes", precision="int8")
    assert model.rest and model.logits(images).shape == (len(images), 2)
    session = ort.InferenceSession(str(model.export(tmp_path / "one.onnx")), providers=["CPUExecutionProvider"])
    assert [o.name for o in session.get_outputs()] == ["logits"]
    (got,) = session.run(None, {"image": model.preprocessing.normalize(images)})
    assert np.abs(got - model.logits(images)).max() < 1e-4


def test_adapting_from_a_model_of_one_class_sees_every_class(tiny_sdk, images):
    model = tiny_sdk.personalize("green stripes")
    adapted = model.adapt(images, min_images=1, min_count=1)
    assert adapted.pseudo_label_counts.sum() == len(images) and "padded" not in adapted.resolution[0]
    one = AdaptRule(min_count=len(images) + 1, min_classes=1, min_images=1)   # the top class alone
    alone = model.adapt(images, **{k: getattr(one, k) for k in ("min_count", "min_classes", "min_images")})
    assert alone.rest and "padded" not in alone.resolution[0]
