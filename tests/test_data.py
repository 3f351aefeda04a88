import json
import subprocess
import sys
import tarfile

import numpy as np
import pytest
import torch
from conftest import synthetic_hierarchy, write_tiny_imagenet_layout
from PIL import Image

from sdk.media.images import fit_to_square
from trainer.data import DataError, load_dataset
from trainer.data.cache import DecodedDataset


def test_image_folder_with_hierarchy_is_decoded_and_cached(synthetic_root, tmp_path):
    data = load_dataset(synthetic_root, image_size=32, cache_dir=tmp_path, progress=False)
    assert data.train.images.shape == (24 * 6, 32, 32, 3) and data.train.images.dtype == np.uint8
    assert data.val.images.shape == (24 * 2, 32, 32, 3)
    assert np.bincount(data.train.labels).tolist() == [6] * 24
    assert isinstance(data.train.images, np.memmap)
    assert data.names[0] == "red disc" and len(data.hierarchy.supercategories) == 3
    # The pixels are the decoded PNG's pixels.
    first = sorted((synthetic_root / "train" / data.wnids[0]).iterdir())[0]
    index = int(np.flatnonzero(data.train.labels == 0)[0])
    assert np.array_equal(data.train.images[index], np.asarray(Image.open(first).convert("RGB")))


def test_cache_is_reused_and_rebuilt_when_the_source_changes(synthetic_root, tmp_path, monkeypatch):
    first = load_dataset(synthetic_root, image_size=32, cache_dir=tmp_path, progress=False)
    import trainer.data.cache as cache

    def fail(*a, **k):
        raise AssertionError("cache rebuilt although nothing changed")

    monkeypatch.setattr(cache, "build_cache", fail)
    assert load_dataset(synthetic_root, image_size=32, cache_dir=tmp_path).folder == first.folder
    assert load_dataset(synthetic_root, image_size=32, cache_dir=tmp_path).folder == first.folder
    monkeypatch.undo()
    assert load_dataset(synthetic_root, image_size=16, cache_dir=tmp_path, progress=False).folder != first.folder


@pytest.mark.parametrize("as_tar", [True, False])
def test_tiny_imagenet_layout_from_archive_or_folder(synthetic_root, tmp_path, as_tar):
    layout = write_tiny_imagenet_layout(synthetic_root, tmp_path / "tiny-imagenet-200")
    source = layout
    if as_tar:
        source = tmp_path / "tiny.tar.gz"
        with tarfile.open(source, "w:gz") as tar:
            tar.add(layout, arcname="tiny-imagenet-200")
    data = load_dataset(source, image_size=32, cache_dir=tmp_path / "cache", progress=False)
    assert len(data.train) == 24 * 6 and len(data.val) == 24 * 2 and data.num_classes == 24
    grey = data.train.images[np.flatnonzero(data.train.labels == 0)[0]]
    assert grey.shape == (32, 32, 3) and np.array_equal(grey[..., 0], grey[..., 1])  # grayscale -> RGB
    assert data.hierarchy.names[0] == "red disc"
    val_labels = [data.wnids[y] for y in data.val.labels[:4]]
    ann = (layout / "val" / "val_annotations.txt").read_text().splitlines()[:4]
    assert val_labels == [line.split("\t")[1] for line in ann]


def test_truncated_archive_is_a_clear_error(synthetic_root, tmp_path):
    layout = write_tiny_imagenet_layout(synthetic_root, tmp_path / "tiny-imagenet-200")
    source = tmp_path / "tiny.tar.gz"
    with tarfile.open(source, "w:gz") as tar:
        tar.add(layout, arcname="tiny-imagenet-200")
    (tmp_path / "cut.tar.gz").write_bytes(source.read_bytes()[: source.stat().st_size // 2])
    with pytest.raises(DataError, match="cut.tar.gz.*(corrupt|truncated)"):
        load_dataset(tmp_path / "cut.tar.gz", cache_dir=tmp_path / "cache")
    (tmp_path / "junk.tar.gz").write_bytes(b"\x1f\x8b" + b"junk" * 100)
    with pytest.raises(DataError, match="junk.tar.gz"):
        load_dataset(tmp_path / "junk.tar.gz", cache_dir=tmp_path / "cache")


def test_unreadable_image_is_named_and_no_half_written_cache_remains(synthetic_root, tmp_path):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(synthetic_root, root)
    bad = sorted((root / "train").iterdir())[3] / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n not really")
    with pytest.raises(DataError, match="broken.png"):   # strict: refused (issue 60: by default, skipped)
        load_dataset(root, image_size=32, cache_dir=tmp_path / "cache", progress=False, strict=True)
    assert not (tmp_path / "cache").exists()   # the failed write removed even the folder it made
    data = load_dataset(root, image_size=32, cache_dir=tmp_path / "lenient", progress=False)
    assert any("broken.png" in line and "skipped 1 file" in line for line in data.report)


def test_bad_paths_and_inconsistent_hierarchies(synthetic_root, tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_dataset(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no images under train"):
        load_dataset(tmp_path / "empty", cache_dir=tmp_path / "cache")
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(synthetic_root, root)
    tsv = (root / "wordnet_hierarchy.tsv").read_text()
    (root / "wordnet_hierarchy.tsv").write_text(tsv + "s99999999\tghost\tentity > ghost\t\n")
    with pytest.raises(DataError, match="s99999999"):
        load_dataset(root, cache_dir=tmp_path / "cache")
    (root / "wordnet_hierarchy.tsv").write_text("header\nonly-one-column\n")
    with pytest.raises(DataError, match=r"wordnet_hierarchy.tsv:2"):
        load_dataset(root, cache_dir=tmp_path / "cache")
    with pytest.raises(DataError, match="not a decoded data set cache"):
        DecodedDataset.open(tmp_path / "empty")


def test_hierarchy_distances_follow_the_tree(synthetic_root):
    h = synthetic_hierarchy(synthetic_root)
    red_disc, blue_disc, red_ring, red_square, red_stripes = (
        h.names.index(n) for n in ("red disc", "blue disc", "red ring", "red square", "red stripes"))
    d = h.distances
    assert d[red_disc, blue_disc] == 2  # siblings under "disc"
    assert d[red_disc, blue_disc] < d[red_disc, red_ring] < d[red_disc, red_square] < d[red_disc, red_stripes]
    assert (d == d.T).all() and (np.diag(d) == 0).all()
    assert set(h.nearest(red_disc, 3)) == {h.names.index(f"{c} disc") for c in ("green", "blue", "yellow")}


def test_fit_to_square_resizes_shorter_side_and_center_crops():
    image = np.zeros((40, 80, 3), np.uint8)
    image[:, 30:50] = 255  # a white band in the center
    out = fit_to_square(image, 20)
    assert out.shape == (20, 20, 3)
    assert out[:, 9].min() == 255 and out[:, 0].max() == 0


def test_cache_cli_reports_bad_paths_without_a_traceback(tmp_path):
    result = subprocess.run([sys.executable, "-m", "trainer", "cache", "--data", str(tmp_path / "nope")],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert "does not exist" in result.stderr and "Traceback" not in result.stderr


def test_cache_meta_records_counts(synthetic_root, tmp_path):
    data = load_dataset(synthetic_root, image_size=32, cache_dir=tmp_path, progress=False)
    meta = json.loads((data.folder / "meta.json").read_text())
    assert meta["counts"] == {"train": 144, "val": 48} and meta["layout"] == "imagefolder"


def test_held_out_classes_are_spread_over_the_hierarchy_and_removed(synthetic_root, tmp_path):
    from trainer.data.holdout import held_out_classes, without_classes

    data = load_dataset(synthetic_root, image_size=32, cache_dir=tmp_path, progress=False)
    held = held_out_classes(data.hierarchy, 6)
    assert held == held_out_classes(data.hierarchy, 6) and len(set(held)) == 6
    families = {data.hierarchy.paths[data.hierarchy.index(w)][3] for w in held}
    assert len(families) == 3  # 24 classes in 3 families: two held out from each
    kept = without_classes(data, held)
    assert kept.wnids == [w for w in data.wnids if w not in held] and len(kept.hierarchy) == 18
    for split in ("train", "val"):
        old, new = getattr(data, split), getattr(kept, split)
        rows = np.flatnonzero(~np.isin(old.labels, [data.wnids.index(w) for w in held]))
        np.testing.assert_array_equal(new.images, old.images[rows])
        assert [kept.wnids[i] for i in new.labels] == [data.wnids[i] for i in old.labels[rows]]
    with pytest.raises(DataError):
        held_out_classes(data.hierarchy, 24)
    with pytest.raises(DataError, match="not in the data"):
        without_classes(data, ["nope"])


def test_concepts_take_every_ancestor_named_in_words_txt_and_survive_the_cache(synthetic_root, tmp_path):
    """A Tiny ImageNet source's words.txt names the hierarchy's ancestor ids; the cache keeps those lines
    (in the vocabulary.toml it converts them into) so that a run's bundle carries every hypernym with its synonyms."""
    layout = write_tiny_imagenet_layout(synthetic_root, tmp_path / "tiny-imagenet-200")
    tsv = (layout / "wordnet_hierarchy.tsv").read_text().splitlines()
    rows = [tsv[0]]
    for line in tsv[1:]:  # every class under "a0"; the first 8 (the discs and rings) also under "a1"
        wnid, name, path, _ = line.split("\t")
        extra = ",a1" if len(rows) <= 8 else ""
        rows.append(f"{wnid}\t{name}\t{path}\ta0,a9{extra}")
    (layout / "wordnet_hierarchy.tsv").write_text("\n".join(rows) + "\n")
    with open(layout / "words.txt", "a") as f:
        f.write("a0\tthing\na1\tround thing, roundel\na2\tunused\n")
    data = load_dataset(layout, image_size=16, cache_dir=tmp_path / "cache", progress=False)
    kept = (data.folder / "vocabulary.toml").read_text()   # the cache keeps the converted vocabulary
    assert 'aliases = ["roundel"]' in kept and "unused" not in kept
    # "a0" holds all 24 classes and "a9" has no name: neither is a concept; the path nodes are concepts too.
    concepts = {c["id"]: c for c in data.hierarchy.concepts()}
    assert concepts["a1"] == {"id": "a1", "names": ["round thing", "roundel"], "members": list(range(8))}
    assert "a0" not in concepts and "a9" not in concepts and "disc" in concepts
    reopened = DecodedDataset.open(data.folder).hierarchy
    assert reopened.concepts() == data.hierarchy.concepts() and (reopened.distances == data.hierarchy.distances).all()


def test_first_images_of_each_class_are_taken_in_stored_order():
    from trainer.data.image_subsets import first_rows_per_class

    labels = np.array([2, 0, 0, 1, 2, 0, 2, 1])
    assert first_rows_per_class(labels, count=2).tolist() == [0, 1, 2, 3, 4, 7]
    assert first_rows_per_class(labels, count=9).tolist() == list(range(8))  # a smaller class keeps all it has
    assert first_rows_per_class(labels, share=0.5).tolist() == [0, 1, 2, 3, 4]  # ceil(1.5) = 2 of 3, 1 of 2
    assert first_rows_per_class(labels, share=0.01).tolist() == [0, 1, 3]  # every class keeps one
    assert first_rows_per_class(labels, share=1.0).tolist() == list(range(8))
    for bad in ({"count": 0}, {"share": 0.0}, {"share": 1.5}):
        with pytest.raises(DataError):
            first_rows_per_class(labels, **bad)
    with pytest.raises(ValueError, match="exactly one"):
        first_rows_per_class(labels, count=2, share=0.5)


def test_fewer_training_images_per_class_keep_the_first_ones_and_every_val_image(synthetic_root, tmp_path):
    from trainer.data.cache import DeviceSplit
    from trainer.data.image_subsets import first_rows_per_class, with_train_images_per_class

    data = load_dataset(synthetic_root, image_size=32, cache_dir=tmp_path, progress=False)
    fewer = with_train_images_per_class(data, 4)
    assert np.bincount(fewer.train.labels).tolist() == [4] * data.num_classes
    rows = first_rows_per_class(data.train.labels, count=4)
    np.testing.assert_array_equal(fewer.train.images, data.train.images[rows])
    np.testing.assert_array_equal(fewer.val.labels, data.val.labels)
    # the GPU path's split gathers the same rows on its device
    on_device = DeviceSplit.of(data.train, torch.device("cpu")).subset(rows)
    images, labels = on_device.take(np.arange(len(rows)))
    np.testing.assert_array_equal(images.numpy(), fewer.train.images)
    np.testing.assert_array_equal(labels.numpy(), fewer.train.labels)
    np.testing.assert_array_equal(on_device.labels, fewer.train.labels)
