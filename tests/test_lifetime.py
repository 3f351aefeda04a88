"""Resources: a dropped bundle and its models are freed without the garbage collector; a bundle file
changed on disk after loading is a BundleError, not a crash; exports never delete what the user owns."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sdk
from sdk.errors import BundleError, SdkError

FREED_WITHOUT_GC = """
import gc, resource, sys, weakref
import numpy as np
import sdk
import sdk.engines.int8_session
sdk.load, sdk.personalize   # sdk's names load lazily: import them (imports leave cyclic garbage) before the check
sdk.engines.int8_session.MIN_SPLIT_BYTES = 0   # an int8 model's sessions in two halves, as at full width
gc.collect()
gc.disable()
alive, rss = [], []
for i in range(12):
    bundle = sdk.load(sys.argv[1])
    model = sdk.personalize(bundle, "blue" if i % 2 else ["red disc", "blue ring"],
                            precision="int8" if i % 3 == 0 else "float32")
    model.predict(np.zeros((32, 32, 3), np.uint8))
    alive += [weakref.ref(bundle), weakref.ref(bundle.bundle), weakref.ref(bundle.engine), weakref.ref(model),
              weakref.ref(bundle.embedder)]
    del bundle, model
    rss.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
assert all(ref() is None for ref in alive), [ref() for ref in alive if ref() is not None][:3]
assert gc.collect() == 0, "reference cycles were left for the collector"
print("peak RSS growth after the second cycle (MB):", (rss[-1] - rss[1]) / 1024)
"""


def test_a_dropped_bundle_is_freed_without_the_garbage_collector(tiny_bundle):
    result = subprocess.run([sys.executable, "-c", FREED_WITHOUT_GC, str(tiny_bundle)], capture_output=True, text=True,
                            cwd=Path(__file__).parents[1], timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    growth = float(result.stdout.split(":")[-1])
    assert growth < 100, result.stdout  # each cycle maps a ~25 MB bundle and builds its sessions


@pytest.mark.parametrize("change", ["truncate", "rewrite"])
def test_a_bundle_changed_on_disk_is_a_bundle_error_not_a_crash(tiny_bundle, tmp_path, change):
    path = tmp_path / "copy.taper"
    shutil.copy(tiny_bundle, path)
    bundle = sdk.load(path)
    sdk.personalize(bundle, "blue")
    if change == "truncate":
        os.truncate(path, path.stat().st_size // 2)
    else:
        with open(path, "r+b") as f:  # same size, new bytes, new modification time
            f.seek(100)
            f.write(b"x")
            os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    with pytest.raises(BundleError, match="changed on disk"):
        sdk.personalize(bundle, "blue")
    safe = sdk.load(tiny_bundle, in_memory=True)
    assert safe.bundle._fd is None and sdk.personalize(safe, "blue").classes


@pytest.mark.parametrize("call", ["adapt", "stream", "export", "examples", "generic"])
def test_every_entry_point_that_reads_a_truncated_bundle_says_so(tiny_bundle, tmp_path, call):
    """The entry points that read the mapped file after load (adapt: every class's head; export: the
    weights; ...) go through one guard (sdk.runtime.reads_mapped_file): BundleError, not SIGBUS."""
    path = tmp_path / "copy.taper"
    shutil.copy(tiny_bundle, path)
    bundle = sdk.load(path)
    model = sdk.personalize(bundle, bundle.classes[:3])
    images = np.random.default_rng(0).integers(0, 255, (4, 32, 32, 3), dtype=np.uint8)
    os.truncate(path, path.stat().st_size // 3)
    calls = {"adapt": lambda: model.adapt(images, min_images=1),
             "stream": lambda: sdk.personalize(bundle, stream=[images]),
             "export": lambda: model.export(tmp_path / "new" / "folders" / "m.onnx"),
             "examples": lambda: sdk.personalize(bundle, examples={"a": list(images[:2]), "b": list(images[2:])}),
             "generic": lambda: bundle.generic()}
    with pytest.raises(BundleError, match="changed on disk"):
        calls[call]()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.taper"]   # a failed export made no folders


def test_export_never_deletes_a_folder_or_leaves_temporary_files(tiny_bundle, tmp_path):
    model = sdk.personalize(sdk.load(tiny_bundle), "blue")
    precious = tmp_path / "x.onnx"
    precious.mkdir()
    (precious / "keep.txt").write_text("mine")
    with pytest.raises(SdkError, match="is a folder"):
        model.export(precious)
    assert (precious / "keep.txt").read_text() == "mine"
    (tmp_path / "y.mlpackage").mkdir()
    with pytest.raises(SdkError, match="not replacing"):
        model.export(tmp_path / "y.mlpackage")
    written = model.export(tmp_path / "z.onnx")
    assert written.is_file() and sorted(p.name for p in tmp_path.iterdir()) == ["x.onnx", "y.mlpackage", "z.onnx"]
    for hostile in (42, tmp_path / ("m" * 300 + ".onnx"), str(tmp_path / "a\0b.onnx")):   # typed, not OSError
        with pytest.raises(SdkError):
            model.export(hostile)
    (tmp_path / "link.mlpackage").symlink_to(tmp_path / "nowhere")   # a dangling link is still there
    with pytest.raises(SdkError, match="not replacing"):
        model.export(tmp_path / "link.mlpackage")


def test_files_are_written_with_the_users_umask(tiny_run, tmp_path):
    from export.bundle import bundle_run

    old = os.umask(0o022)
    try:
        path = bundle_run(tiny_run, tmp_path / "b.taper")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


def test_a_killed_write_leaves_no_temporary_file(tmp_path):
    code = """
import sys, time
from sdk.media.files import atomic_file
with atomic_file(sys.argv[1]) as f:
    f.write(b"partial")
    print("writing", flush=True)
    time.sleep(60)
"""
    target = tmp_path / "out.bin"
    process = subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE, text=True,
                               cwd=Path(__file__).parents[1])
    assert process.stdout.readline().strip() == "writing"
    assert len(list(tmp_path.iterdir())) == 1  # the temporary file
    process.terminate()
    assert process.wait(30) == 128 + 15
    assert list(tmp_path.iterdir()) == []


def test_predictions_are_finite(tiny_bundle):
    model = sdk.personalize(sdk.load(tiny_bundle), "blue")
    assert np.isfinite(model.predict_proba(np.zeros((2, 32, 32, 3), np.uint8))).all()
