"""The runtime CLI (`python -m sdk personalize ...`), run in-process on the tiny bundle."""

import json

import numpy as np
import onnxruntime as ort
from PIL import Image

from sdk.__main__ import main


def test_the_cli_prints_classes_timings_and_a_prediction_per_image_and_exports(tiny_bundle, tmp_path, capsys):
    photos = tmp_path / "photos"
    photos.mkdir()
    rng = np.random.default_rng(0)
    for i in range(2):
        Image.fromarray(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8)).save(photos / f"{i}.png")
    (photos / "notes.txt").write_text("not an image")  # skipped: not an image suffix
    exported = tmp_path / "blue.onnx"
    assert main(["personalize", str(tiny_bundle), "blue", "--images", str(photos), "--export", str(exported)]) == 0
    out = capsys.readouterr().out
    header = json.loads(out[:out.index("\n}\n") + 2])
    assert header["classes"] and {"encode", "fuse_fold", "total"} <= set(header["timings_ms"])
    predictions = [line.split("\t") for line in out.splitlines() if "\t" in line]
    assert [p[0] for p in predictions] == ["0.png", "1.png"]
    assert all(p[1] in header["classes"] and 0 < float(p[2]) <= 1 for p in predictions)
    assert f"exported {exported}" in out
    session = ort.InferenceSession(str(exported))
    size = session.get_inputs()[0].shape[-1]
    (probabilities,) = session.run(None, {session.get_inputs()[0].name: np.zeros((1, 3, size, size), np.float32)})
    assert probabilities.shape[-1] == len(header["classes"])


def test_the_cli_reports_bad_input_as_one_error_line(tiny_bundle, tmp_path, capsys):
    assert main(["personalize", str(tiny_bundle), "   "]) == 2                     # empty description
    assert main(["personalize", str(tiny_bundle), "blue", "--images", str(tmp_path / "missing")]) == 2
    assert main(["personalize", str(tmp_path / "none.taper"), "blue"]) == 2        # no bundle
    (tmp_path / "fake.png").write_bytes(b"not a png")
    assert main(["personalize", str(tiny_bundle), "blue", "--images", str(tmp_path / "fake.png")]) == 2
    assert main(["personalize", str(tiny_bundle), "blue", "--export", str(tmp_path / "x.tflite")]) == 2
    err = capsys.readouterr().err
    assert err.count("error: ") == 5 and "Traceback" not in err
