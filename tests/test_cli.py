"""The runtime CLI (`python -m sdk personalize ...`), run in-process on the tiny bundle."""

import json
import os

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
    args = ["personalize", str(tiny_bundle), "blue", "--images", str(photos)]
    assert main([*args, "--export", str(exported), "--json"]) == 0
    header = json.loads(capsys.readouterr().out)  # --json: the whole output is one JSON object
    assert header["classes"] and {"encode", "fuse_fold", "total"} <= set(header["timings_ms"])
    predictions = header["predictions"]
    assert [p["image"] for p in predictions] == ["0.png", "1.png"]
    assert all(p["label"] in header["classes"] and 0 < p["probability"] <= 1 for p in predictions)
    assert header["exported"] == str(exported)
    assert main(args) == 0  # without --json: a readable report, no JSON
    text = capsys.readouterr().out
    assert text.startswith("classes (") and "{" not in text
    assert [line.split()[0] for line in text.splitlines() if line.startswith(("0.png", "1.png"))] == ["0.png", "1.png"]
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


def test_a_file_name_that_is_not_utf8_prints_as_valid_utf8_json(tiny_bundle, tmp_path, capsys):
    from PIL import Image

    folder = tmp_path / "imgs"
    folder.mkdir()
    Image.new("RGB", (40, 40), (0, 0, 255)).save(os.fsencode(folder) + b"/\xff\xfe.png")
    assert main(["personalize", str(tiny_bundle), "blue", "--images", str(folder), "--json"]) == 0
    out = capsys.readouterr().out
    out.encode("utf-8")   # no lone surrogates: printable as UTF-8
    assert json.loads(out)["predictions"][0]["image"] == "\\xff\\xfe.png"
    assert main(["personalize", str(tiny_bundle), "blue", "--images", str(folder)]) == 0   # the readable form too
    capsys.readouterr().out.encode("utf-8")


def test_the_cli_prints_its_version(capsys):
    import pytest

    import sdk

    with pytest.raises(SystemExit) as exit_code:
        main(["--version"])
    assert exit_code.value.code == 0 and capsys.readouterr().out.strip() == f"taper-sdk {sdk.__version__}"


def test_the_export_cli_writes_golden_vectors_for_descriptions(tiny_bundle, tmp_path, capsys):
    from export.__main__ import main as export_main

    export_main(["golden", str(tiny_bundle), "--out", str(tmp_path / "golden"), "--case", "rings"])
    spec = json.loads((tmp_path / "golden" / "golden.json").read_text())
    assert [c["description"] for c in spec["cases"]] == ["rings"] and spec["cases"][0]["task"] == [4, 5, 6, 7]
    assert (tmp_path / "golden" / spec["cases"][0]["folded"]).stat().st_size > 0


def test_the_readable_report_names_a_class_by_its_first_name_and_json_keeps_them_all():
    from sdk.__main__ import report

    result = {"classes": ["ladybug, ladybeetle, lady beetle, ladybird, ladybird beetle", "goldfish, Carassius auratus"],
              "resolution": ["'ladybugs': class name", "added 'goldfish', the nearest by text similarity"],
              "timings_ms": {"total": 1.0},
              "predictions": [{"image": "a.jpg", "label": "goldfish, Carassius auratus", "probability": 0.5}]}
    text = report(result)
    assert "classes (2): ladybug, goldfish" in text and "a.jpg  goldfish  (0.500)" in text
    assert "\n  'ladybugs': class name\n  added 'goldfish'," in text   # each line of the resolution as it is
    assert "ladybeetle" not in text and "Carassius" not in text


def test_names_print_with_their_control_and_bidirectional_characters_written_out(tiny_bundle, tmp_path, capsys):
    """A file named "evil\\u202egnp.exe" would read "evilexe.png" in a terminal, and an escape sequence in a
    name or a description would act on the terminal: both print written out, in the readable form and in
    --json (whose escapes parse back to the same names), and in the error line."""
    from PIL import Image

    from sdk.__main__ import report

    folder = tmp_path / "imgs"
    folder.mkdir()
    Image.new("RGB", (40, 40), (0, 0, 255)).save(folder / "evil\u202egnp.png")
    assert main(["personalize", str(tiny_bundle), "blue", "--images", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "evil[U+202E]gnp.png" in text and "\u202e" not in text
    assert main(["personalize", str(tiny_bundle), "blue", "--images", str(folder), "--json"]) == 0
    out = capsys.readouterr().out
    assert "\u202e" not in out and json.loads(out)["predictions"][0]["image"] == "evil\u202egnp.png"
    hostile = {"classes": ["red\x1b[2J, x"], "resolution": ["\x1b]0;title\x07 read"], "timings_ms": {},
               "predictions": [{"image": "a\nb.jpg", "label": "red\x1b[2J, x", "probability": 0.5}]}
    text = report(hostile)
    assert "\x1b" not in text and "\x07" not in text and "red\\x1b[2J" in text and "a\\x0ab.jpg" in text
    assert len(text.splitlines()) == 6   # the newline in the file name did not start a line
    assert main(["personalize", str(tiny_bundle), "\x1b[31mzzzq\u202e"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error:") and "\x1b" not in error and "\u202e" not in error
