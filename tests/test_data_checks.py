"""The data set is checked before the first epoch (trainer/data/checks.py, issue 60 part 3): every faulty
file is named and skipped (or, strict, the build is refused and nothing is written), conversions and resizes
are said, a val split is made when there is none, and the caches can be listed and cleared."""

import io
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from trainer.data.cache import clear_caches, list_caches, load_dataset
from trainer.data.errors import DataError


def png(image: Image.Image, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt)
    return buffer.getvalue()


def photo(seed: int, size: int = 16) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 255, (size, size, 3), dtype=np.uint8))


def folder(root: Path, classes=("cat", "dog", "fish"), train: int = 12, val: int = 2) -> Path:
    for c, name in enumerate(classes):
        for split, count in (("train", train), ("val", val)):
            (root / split / name).mkdir(parents=True, exist_ok=True)
            for i in range(count):
                (root / split / name / f"{i}.png").write_bytes(png(photo(1000 * c + 100 * (split == "val") + i)))
    return root


def test_every_faulty_file_is_named_and_skipped_and_conversions_are_said(tmp_path, capsys):
    data = folder(tmp_path / "photos")
    rgb = photo(7)
    (data / "train/cat/empty.jpg").write_bytes(b"")
    (data / "train/cat/cut.jpg").write_bytes(png(rgb, "JPEG")[:60])
    (data / "train/dog/notes.jpg").write_bytes(b"my notes")
    (data / "train/dog/readme.txt").write_bytes(b"not an image by name")
    (data / "train/dog/cmyk.jpg").write_bytes(png(rgb.convert("CMYK"), "JPEG"))
    (data / "train/fish/deep.png").write_bytes(png(Image.fromarray(np.full((16, 16), 40000, np.uint16))))
    (data / "train/fish/glass.png").write_bytes(png(rgb.convert("RGBA")))
    (data / "train/fish/wide.png").write_bytes(png(photo(8, 40).resize((40, 24))))
    (data / "train/fish/huge.png").write_bytes(png(Image.new("1", (9000, 9000))))
    shutil.copy(data / "train/cat/3.png", data / "val/cat/again.png")
    loaded = load_dataset(data, image_size=16, cache_dir=tmp_path / "cache")
    report = "\n".join(loaded.report)
    for name in ("train/cat/empty.jpg (zero bytes)", "train/cat/cut.jpg", "train/dog/notes.jpg", "train/fish/huge.png",
                 "train/dog/readme.txt", "train/dog/cmyk.jpg", "train/fish/deep.png", "train/fish/glass.png",
                 "train/cat/3.png = val/cat/again.png", "40x24 (1)"):
        assert name in report, name
    assert "converted 1 CMYK image(s)" in report and "16-bit" in report and "alpha" in report
    assert len(loaded.train) == 3 * 12 + 4 and len(loaded.val) == 3 * 2 + 1   # 4 readable extra train images
    assert "[data] skipped 4 files" in capsys.readouterr().out   # said when the cache is built
    # strict: the same data is refused, naming the files, and no cache is written
    with pytest.raises(DataError, match=r"refused \(strict\).*empty\.jpg"):
        load_dataset(data, image_size=16, cache_dir=tmp_path / "strict", strict=True)
    assert not (tmp_path / "strict").exists() or not any((tmp_path / "strict").rglob("meta.json"))
    with pytest.raises(DataError, match="refused"):   # nor is the lenient cache reused under strict
        load_dataset(data, image_size=16, cache_dir=tmp_path / "cache", strict=True)


def test_a_class_without_enough_photos_is_refused_and_nothing_is_written(tmp_path):
    data = folder(tmp_path / "photos")
    for p in sorted((data / "train/fish").iterdir())[1:]:
        p.unlink()
    with pytest.raises(DataError, match=r"fewer than 2 readable training images: fish"):
        load_dataset(data, image_size=16, cache_dir=tmp_path / "cache")
    assert list_caches(tmp_path / "cache") == []


def test_no_val_folder_holds_out_a_seeded_split_and_says_so(tmp_path):
    data = folder(tmp_path / "photos", val=0)
    shutil.rmtree(data / "val")
    loaded = load_dataset(data, image_size=16, cache_dir=tmp_path / "cache")
    assert len(loaded.val) == 3 and len(loaded.train) == 33 and "no val/ folder" in loaded.report[0]
    assert sorted(loaded.val.labels.tolist()) == [0, 1, 2]
    again = load_dataset(data, image_size=16, cache_dir=tmp_path / "other")
    assert np.array_equal(again.val.images, loaded.val.images)   # seeded


def test_caches_are_listed_and_cleared(tmp_path):
    load_dataset(folder(tmp_path / "photos"), image_size=16, cache_dir=tmp_path / "cache")
    (tmp_path / "cache" / "not-a-cache").mkdir()
    rows = list_caches(tmp_path / "cache")
    assert len(rows) == 1 and rows[0]["source"].endswith("photos")
    assert clear_caches(tmp_path / "cache") == 1 and list_caches(tmp_path / "cache") == []
    assert (tmp_path / "cache" / "not-a-cache").is_dir() and (tmp_path / "photos").is_dir()   # only caches go


def test_the_cli_lists_and_clears_caches_and_builds_one_with_its_report(tmp_path, monkeypatch, capsys):
    from trainer.__main__ import main

    monkeypatch.setenv("TAPER_CACHE", str(tmp_path / "root"))
    data = folder(tmp_path / "photos")
    (data / "train/cat/empty.jpg").write_bytes(b"")
    assert main(["cache", "--data", str(data), "--size", "16"]) == 0
    assert "[data] skipped 1 file that is not a readable image" in capsys.readouterr().out
    assert main(["cache", "list"]) == 0
    assert "1 caches" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0 and "removed 1 caches" in capsys.readouterr().out
    assert main(["cache"]) == 2 and "needs --data" in capsys.readouterr().err
