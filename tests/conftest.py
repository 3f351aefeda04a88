import os

# `make test` runs one pytest worker per core (pytest-xdist, pyproject.toml's addopts). torch's OpenMP threads
# busy-wait, so two workers of two threads each on two cores ran the suite at a third of its serial speed
# (2026-11-29: 20 min against 11; a tiny run's test took 263 s against 29 s). One thread per worker, and
# for the processes the tests start, set before anything imports torch (the imports below do).
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"
    # Where a test does give torch both cores (`every_core` below), its idle OpenMP threads sleep rather
    # than spin: the other worker is busy on the same two cores. A tiny run on two threads beside a busy
    # one-thread trainer took 33.1 s spinning and 21.1 s passive, and the busy trainer did 17% more steps;
    # alone, 12.8 s against 15.0 s. The weights are the same bits (2026-11-29, experiments.md).
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

import sys  # noqa: E402

# Bytecode. This machine's environment sets PYTHONDONTWRITEBYTECODE, so every process of the suite (the
# workers, ~65 that the tests start) compiled the project's sources anew, and each worker rewrote every test
# file's asserts anew. The suite writes bytecode as Python does by default (`__pycache__/`, git-ignored), set
# before the controller starts the workers: they and the processes the tests start read it and fill it in.
# `pytest --collect-only -n 0` took 7.4 and 5.6 CPU-s without it; with it 8.3 the first time, then 4.3 and 3.6
# (2026-11-30, experiments.md). Python checks each cached file against its source's size and time: none goes stale.
if "PYTEST_XDIST_WORKER" not in os.environ:
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False

import fcntl  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
from collections.abc import Callable  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

# Each test compiles as a fresh process would; tests/test_device_cache.py turns the warm-start cache on.
os.environ["TAPER_DEVICE_CACHE"] = "0"


SUITE_TIMES = Path(__file__).resolve().parents[1] / "docs" / "results" / "suite.json"


# The session fixtures that build with `built_once` (below; each declared with @shared_build): a test that asks
# for one waits while another worker builds it.
SHARED_BUILDS: set[str] = set()


def shared_build(fixture: Callable) -> Callable:
    """A session fixture built once for all workers by `built_once`, named in SHARED_BUILDS for the order."""
    SHARED_BUILDS.add(fixture.__name__)
    return pytest.fixture(scope="session")(fixture)


def pytest_collection_modifyitems(config, items):
    """Test files in the order of their time in the last timing, slowest first (docs/results/suite.json's
    `file_seconds`, written by `python -m scripts.suite_timing`); a file it does not list keeps its place
    after them. The workers take whole files in this order (pyproject.toml: --dist loadfile
    --no-loadscope-reorder; xdist's own order is by test count, which put the few-test files that run for a
    minute last, and one worker idle beside them at the end). The tests of a file keep their order.

    One exception: the slowest file whose tests need none of SHARED_BUILDS goes second, so that the second
    worker (xdist hands the first two files out one each) runs it while the first builds them. With the
    second-slowest file second, that worker waited 16.3 s for the tiny run (2026-11-29, experiments.md)."""
    try:
        seconds = json.loads(SUITE_TIMES.read_text()).get("file_seconds", {})
    except (OSError, ValueError):
        return
    files = sorted(dict.fromkeys(map(file_of, items)), key=lambda f: -seconds.get(f, 0.0))   # stable
    needs = {file_of(item) for item in items if SHARED_BUILDS & set(getattr(item, "fixturenames", ()))}
    free = next((f for f in files[1:] if f not in needs), None)
    if free is not None:
        files.remove(free)
        files.insert(1, free)
    place = {f: k for k, f in enumerate(files)}
    items.sort(key=lambda item: place[file_of(item)])


def file_of(item) -> str:
    """The test file of a collected test: "tests/test_x.py"."""
    return item.nodeid.split("::")[0]


def built_once(tmp_path_factory, name: str, build: Callable[[Path], Path]) -> Path:
    """`build(folder)` run once for the whole test run, its result shared by every worker.

    `make test` runs pytest on every core (pytest-xdist, pyproject.toml's addopts), and each worker process
    runs the session fixtures of its own. A trained run, a bundle or a lowered companion takes seconds to a
    minute to build, so the first worker to ask builds it in a folder beside the workers' own, under a file
    lock, and the others wait for it and reuse it. Without workers (`pytest -n 0`) it is
    built in the session's temporary folder as before. A build that fails leaves no result: the next worker
    to ask tries again and fails the same way."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return build(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent / "shared"
    shared.mkdir(exist_ok=True)
    done = shared / f"{name}.json"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # released when the file closes, even if build raises
        if done.exists():
            return Path(json.loads(done.read_text())["path"])
        folder = shared / name
        shutil.rmtree(folder, ignore_errors=True)   # a half-built folder of a failed build
        folder.mkdir()
        with every_core():
            result = build(folder)
        done.write_text(json.dumps({"path": str(result)}))
        return result


@contextmanager
def every_core():
    """torch on every core inside the block, as in a process without workers. The shared fixtures are built so:
    the tiny run's weights then are those of a run without workers (a float sum split over other threads
    rounds otherwise), which the golden tests' tolerances were measured on (2026-11-29: a tiny run trained on
    one thread made Java's and Python's int8 networks differ by 17 output steps in one case of
    tests/test_android_core.py, whose bound is 10; 0.8 steps on average, within its bound of 1). A test that
    retrains part of the tiny run and compares it with the fixture bit for bit trains so too."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def synthetic_root(tmp_path_factory) -> Path:
    """The synthetic ImageFolder (24 classes in 3 families), built once per test session."""
    # Imported here, not at the top: the controller process of `-n auto` runs no test, and `trainer` imports
    # torch (~2.5 CPU-s).
    from trainer.data.synthetic import make_synthetic_dataset

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


@shared_build
def tiny_run(tmp_path_factory) -> Path:
    """A finished `tiny` preset run (stages 1-3), trained once per test session."""
    from trainer.run import run

    return built_once(tmp_path_factory, "runs", lambda folder: run(folder / "tiny", "tiny", progress=False))


@shared_build
def tiny_bundle(tiny_run, tmp_path_factory) -> Path:
    from export.bundle import bundle_run

    return built_once(tmp_path_factory, "bundles", lambda folder: bundle_run(tiny_run, folder / "tiny.taper"))


@pytest.fixture(scope="session")
def tiny_data(tiny_run):
    """The decoded data set the tiny run trained on."""
    from trainer.config import TrainConfig
    from trainer.run import open_data

    return open_data(TrainConfig.load(tiny_run / "config.json"), progress=False)


@pytest.fixture(scope="session")
def tiny_sdk(tiny_bundle):
    """The tiny bundle loaded by the runtime (shared: tests must not change it). Its text encoder is made here:
    while this fixture holds it, a test's own load of the same bundle shares it (sdk.text.encoder.shared_encoder)
    instead of creating its session again."""
    import sdk

    bundle = sdk.load(tiny_bundle)
    bundle.encoder   # noqa: B018 - made now, held for the session
    return bundle


@shared_build
def tiny_companion(tiny_bundle, tmp_path_factory) -> Path:
    """The tiny bundle's ExecuTorch companion (export/executorch_program.py; about a minute to lower)."""
    pytest.importorskip("executorch")
    from export.executorch_program import export_companion

    return built_once(tmp_path_factory, "xnnpack",
                      lambda folder: export_companion(tiny_bundle, folder / "tiny.taper.xnnpack"))
