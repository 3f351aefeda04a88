import os
import shutil
from pathlib import Path

import pytest

from trainer.data.synthetic import make_synthetic_dataset

# Each test compiles as a fresh process would; tests/test_device_cache.py turns the warm-start cache on.
os.environ["TAPER_DEVICE_CACHE"] = "0"


@pytest.fixture(scope="session")
def synthetic_root(tmp_path_factory) -> Path:
    """The synthetic ImageFolder (24 classes in 3 families), built once per test session."""
    return make_synthetic_dataset(tmp_path_factory.mktemp("data") / "shapes", image_size=32,
                                  train_per_class=6, val_per_class=2)


def synthetic_hierarchy(root: Path):
    """The synthetic data's WordNet-format files converted as a data source would (trainer/data/wordnet.py)."""
    from trainer.data.wordnet import wordnet_vocabulary

    tsv = (root / "wordnet_hierarchy.tsv").read_text()
    ids = [line.split("\t")[0] for line in tsv.splitlines()[1:] if line]
    return wordnet_vocabulary(ids, tsv, (root / "supercategories.json").read_text(), where=str(root)).hierarchy()


def write_tiny_imagenet_layout(src: Path, dst: Path) -> Path:
    """Re-arrange the synthetic ImageFolder into the Tiny ImageNet layout (JPEGs, val annotations)."""
    from PIL import Image

    dst.mkdir(parents=True)
    wnids = sorted(p.name for p in (src / "train").iterdir())
    (dst / "wnids.txt").write_text("\n".join(wnids) + "\n")
    (dst / "words.txt").write_text("".join(f"{w}\tname of {w}\n" for w in wnids))
    for w in wnids:
        (dst / "train" / w / "images").mkdir(parents=True)
        for i, p in enumerate(sorted((src / "train" / w).iterdir())):
            image = Image.open(p)
            if i == 0:
                image = image.convert("L")  # Tiny ImageNet has grayscale images too
            image.save(dst / "train" / w / "images" / f"{w}_{i}.JPEG")
    (dst / "val" / "images").mkdir(parents=True)
    lines = []
    for w in wnids:
        for p in sorted((src / "val" / w).iterdir()):
            name = f"val_{len(lines)}.JPEG"
            Image.open(p).save(dst / "val" / "images" / name)
            lines.append(f"{name}\t{w}\t0\t0\t31\t31")
    (dst / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")
    for name in ("wordnet_hierarchy.tsv", "supercategories.json"):
        shutil.copy(src / name, dst / name)
    return dst


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """A finished `tiny` preset run (stages 1-3), trained once per test session."""
    from trainer.run import run

    return run(tmp_path_factory.mktemp("runs") / "tiny", "tiny", progress=False)


@pytest.fixture(scope="session")
def tiny_bundle(tiny_run, tmp_path_factory) -> Path:
    from export.bundle import bundle_run

    return bundle_run(tiny_run, tmp_path_factory.mktemp("bundles") / "tiny.taper")


@pytest.fixture(scope="session")
def tiny_data(tiny_run):
    """The decoded data set the tiny run trained on."""
    from trainer.config import TrainConfig
    from trainer.run import open_data

    return open_data(TrainConfig.load(tiny_run / "config.json"), progress=False)


@pytest.fixture(scope="session")
def tiny_sdk(tiny_bundle):
    """The tiny bundle loaded by the runtime (shared: tests must not change it)."""
    import sdk

    return sdk.load(tiny_bundle)


@pytest.fixture(scope="session")
def tiny_companion(tiny_bundle, tmp_path_factory) -> Path:
    """The tiny bundle's ExecuTorch companion (export/executorch_program.py; about a minute to lower)."""
    pytest.importorskip("executorch")
    from export.executorch_program import export_companion

    return export_companion(tiny_bundle, tmp_path_factory.mktemp("xnnpack") / "tiny.taper.xnnpack")
