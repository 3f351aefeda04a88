import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

import sdk
from sdk.errors import DescriptionError, ImageError

DESCRIPTIONS = ["round shapes", "blue", "red disc, green square", ["yellow ring", "blue stripes", "red square"],
                "textures"]


@pytest.fixture(scope="module")
def bundle(tiny_bundle):
    return sdk.load(tiny_bundle)


@pytest.fixture(scope="module")
def standard_bundle(tiny_bundle):
    return sdk.load(tiny_bundle, device_compile=False)


@pytest.fixture(scope="module")
def stage3(tiny_run):
    from trainer.config import TrainConfig
    from trainer.run import load_stage3, make_context

    ctx = make_context(tiny_run, TrainConfig.load(tiny_run / "config.json"), progress=False)
    return ctx, load_stage3(ctx, tiny_run, "taper", 384)


def val_images(ctx, n=16):
    return np.ascontiguousarray(ctx.data.val.images[:n])


@pytest.mark.parametrize("route", ["compiled", "standard"])
@pytest.mark.parametrize("description", DESCRIPTIONS)
def test_personalized_logits_equal_the_trainers_mixed_torch_model(bundle, standard_bundle, stage3, description,
                                                                  route):
    from trainer.data.transforms import to_normalized_tensor
    from trainer.models import ResNet18, functional_forward

    ctx, model = stage3
    bundle = bundle if route == "compiled" else standard_bundle
    personalized = sdk.personalize(bundle, description)
    assert bundle.engine.route == route
    task = personalized.class_indices
    # The mixer: numpy in the runtime, torch in the trainer, same task embedding.
    with torch.no_grad():
        alpha = model.alpha(torch.from_numpy(bundle.bundle.class_embeddings[task].mean(0, keepdims=True) /
                                             np.linalg.norm(bundle.bundle.class_embeddings[task].mean(0))))[0]
    assert np.abs(alpha.numpy() - personalized.alpha).max() < 1e-5
    images = val_images(ctx)
    with torch.no_grad():
        x = to_normalized_tensor(torch.from_numpy(images), ctx.preprocessing)
        reference = functional_forward(ResNet18(ctx.model_config).eval(), model.bank.state_dict_for(alpha), x)
    got = personalized.logits(images)
    assert np.abs(got - reference[:, torch.from_numpy(task)].numpy()).max() < 1e-4


def test_a_compiled_graph_that_does_not_reproduce_the_standard_session_is_not_used(tiny_bundle, monkeypatch):
    import sdk.engines.onnxruntime
    from sdk.engines.compiled import compile_backbone

    def misplaced(*args):  # a compiled graph where two same-shaped weights feed each other's inputs
        good = compile_backbone(*args)
        names = [n for n in good.inputs if n.endswith(".weight")]
        i, j = next((i, j) for i in names for j in names if i < j and good.inputs[i][1] == good.inputs[j][1])
        good.inputs[i], good.inputs[j] = good.inputs[j], good.inputs[i]
        return good

    monkeypatch.setattr(sdk.engines.onnxruntime, "compile_backbone", misplaced)
    b = sdk.load(tiny_bundle).warm_up()
    assert b.engine.compile_tried and b.engine.route == "standard"


def test_later_personalizations_leave_earlier_models_unchanged(bundle, stage3):
    images = val_images(stage3[0])
    first = sdk.personalize(bundle, "round shapes")
    before = first.logits(images)
    for description in DESCRIPTIONS:  # reuse the weight buffers several times
        sdk.personalize(bundle, description)
    assert np.array_equal(first.logits(images), before)


def test_resolution_rules(bundle):
    group = sdk.personalize(bundle, "round shapes")
    assert set(group.classes) == {f"{c} {s}" for c in ("red", "green", "blue", "yellow") for s in ("disc", "ring")}
    assert sorted(sdk.personalize(bundle, "red disc, green square").classes) == ["green square", "red disc"]
    assert len(sdk.personalize(bundle, ["yellow ring"]).classes) == 2  # padded to min_classes
    capped = sdk.personalize(bundle, "textures", max_classes=3)
    assert len(capped.classes) == 8  # a named group is taken whole
    assert len(sdk.personalize(bundle, "blue", max_classes=3).classes) <= 3


@pytest.mark.parametrize("bad", ["", "   ", "x" * 5000, ["no such class"], [1, 2], None])
def test_bad_descriptions_raise_description_error(bundle, bad):
    with pytest.raises(DescriptionError):
        sdk.personalize(bundle, bad)


def test_absurd_description_fails_or_falls_back_to_the_nearest_classes(bundle):
    try:
        model = sdk.personalize(bundle, "qzxv wkjh plmn")
    except DescriptionError as e:
        assert "matches" in str(e)
    else:
        assert 2 <= len(model.classes) <= 20


def test_predict_accepts_paths_pil_arrays_and_batches(bundle, tmp_path, stage3):
    from PIL import Image

    ctx, _ = stage3
    model = sdk.personalize(bundle, "round shapes")
    image = val_images(ctx, 1)[0]
    Image.fromarray(image).save(tmp_path / "a.png")
    p = model.predict_proba(image)
    assert p.shape == (1, 8) and np.isclose(p.sum(), 1)
    label, prob = model.predict(str(tmp_path / "a.png"))
    assert label in model.classes and 0 < prob <= 1
    assert np.allclose(model.predict_proba(Image.fromarray(image)), p, atol=1e-6)
    assert len(model.predict([image, image])) == 2
    big = np.asarray(Image.fromarray(image).resize((96, 64)))  # other sizes: resized + center-cropped
    assert model.predict_proba(big).shape == (1, 8)
    assert model.predict_proba(image[..., 0]).shape == (1, 8)  # grayscale: replicated to RGB


def test_bad_images_raise_image_error(bundle, tmp_path):
    model = sdk.personalize(bundle, "round shapes")
    (tmp_path / "notes.jpg").write_text("not an image")
    for bad in (np.zeros((32, 32, 4), np.uint8), np.full((32, 32, 3), 2.0, np.float32), str(tmp_path / "notes.jpg"),
                str(tmp_path / "missing.png"), 42, []):
        with pytest.raises(ImageError):
            model.predict(bad)


def test_threads_personalizing_and_predicting_match_serial(bundle, stage3):
    ctx, _ = stage3
    images = val_images(ctx, 8)
    serial = {d if isinstance(d, str) else ",".join(d): sdk.personalize(bundle, d).predict_proba(images)
              for d in DESCRIPTIONS}
    results, errors = {}, []

    def work(d):
        try:
            key = d if isinstance(d, str) else ",".join(d)
            results[key] = sdk.personalize(bundle, d).predict_proba(images)
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(d,)) for d in DESCRIPTIONS * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for key, value in serial.items():
        assert np.allclose(results[key], value, atol=1e-6)


def test_load_personalize_predict_work_offline_and_without_torch(tiny_bundle):
    code = f"""
import socket
def refuse(*a, **k):
    raise RuntimeError("network access attempted")
socket.socket = refuse
socket.create_connection = refuse
import numpy as np, sdk
b = sdk.load({str(tiny_bundle)!r})
m = sdk.personalize(b, "round shapes, blue stripes")
print(m.predict(np.zeros((32, 32, 3), np.uint8)))
import sys
assert "torch" not in sys.modules and "trainer" not in sys.modules, "the runtime imported torch"
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert result.returncode == 0, result.stderr


def test_timings_cover_every_step(bundle):
    free_text = sdk.personalize(bundle.warm_up(), "blue")  # warm: no one-time "compile" step
    timings = free_text.timings
    assert set(timings) == {"encode", "resolve", "mixer", "fuse_fold", "session", "total"}
    assert timings["total"] == pytest.approx(sum(v for k, v in timings.items() if k != "total"), abs=0.01)
    assert "group" not in free_text.resolution[0] and timings["encode"] > 0
    group = sdk.personalize(bundle, "textures")
    assert "group" in group.resolution[0] and group.timings["encode"] == 0  # a group name: nothing embedded
    assert sdk.personalize(bundle, bundle.classes[:2]).timings["encode"] == 0
    assert sdk.personalize(bundle, "red disc, green square").timings["encode"] == 0  # class names in a list
