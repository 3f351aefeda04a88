"""The warm-start cache (sdk/engines/device_cache.py): a second process takes the compiled backbone from disk
instead of compiling; a damaged entry costs a rebuild, never an error or a wrong result; the folder is
capped, listed and cleared; `cache=False` neither reads nor writes it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sdk
from sdk.engines import device_cache
from sdk.text import encoder_cache


@pytest.fixture()
def cache_folder(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "device-cache"
    monkeypatch.setenv(device_cache.ENVIRONMENT, str(folder))
    return folder


def _probs(bundle) -> np.ndarray:
    model = sdk.personalize(bundle, ["red disc", "blue ring"])
    return model.predict_proba(np.random.default_rng(0).integers(0, 255, (2, 32, 32, 3), np.uint8))


def test_an_entry_is_written_after_the_checked_compile_and_read_back_equal(tiny_bundle, cache_folder, monkeypatch):
    first = sdk.load(tiny_bundle).warm_up()
    backbones = [e["key"] for e in device_cache.entries() if e["kind"] == "backbone"]
    assert first.engine.route == "compiled" and backbones == [first.engine.cache_key]
    stored = device_cache.load(first.engine.cache_key)
    compiled = first.engine.current.compiled
    assert stored.graph == compiled.graph and np.array_equal(stored.constants, compiled.constants)
    assert stored.placements == compiled.placements and stored.inputs == compiled.inputs
    import sdk.engines.onnxruntime as engine

    def compile_again(*args, **kwargs):
        raise AssertionError("compiled again instead of reading the cache")

    monkeypatch.setattr(engine, "compile_backbone", compile_again)
    second = sdk.load(tiny_bundle).warm_up()
    assert second.engine.route == "compiled"
    np.testing.assert_allclose(_probs(second), _probs(first), atol=1e-6)


@pytest.mark.parametrize("damage", ["graph", "constants", "entry", "truncate", "key"])
def test_a_damaged_entry_is_rebuilt_not_trusted(tiny_bundle, cache_folder, damage):
    reference = _probs(sdk.load(tiny_bundle, cache=False).warm_up())
    key = sdk.load(tiny_bundle).warm_up().engine.cache_key
    folder = cache_folder / key
    if damage in ("graph", "constants"):
        path = folder / (device_cache.GRAPH if damage == "graph" else device_cache.CONSTANTS)
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 0x40
        path.write_bytes(bytes(raw))
    elif damage == "entry":
        (folder / device_cache.ENTRY).write_text("{not json")
    elif damage == "truncate":
        path = folder / device_cache.GRAPH
        path.write_bytes(path.read_bytes()[:100])
    else:   # another bundle's entry under this key
        entry = (folder / device_cache.ENTRY).read_text().replace(key, "f" * 32)
        (folder / device_cache.ENTRY).write_text(entry)
    assert device_cache.load(key) is None and not folder.exists()     # removed, not used
    rebuilt = sdk.load(tiny_bundle).warm_up()
    assert rebuilt.engine.route == "compiled" and folder.is_dir()      # compiled and stored again
    np.testing.assert_allclose(_probs(rebuilt), reference, atol=1e-6)


def test_cache_false_neither_reads_nor_writes(tiny_bundle, cache_folder):
    bundle = sdk.load(tiny_bundle, cache=False).warm_up()
    assert bundle.engine.cache_key is None and device_cache.entries() == []


def test_the_folder_is_capped_least_recently_used_first_and_cleared(tiny_bundle, cache_folder):
    bundle = sdk.load(tiny_bundle)
    bundle.compile_engine()   # the backbone's entry only (warm_up also stores the encoder's: sdk.text.encoder_cache)
    key = bundle.engine.cache_key
    compiled = device_cache.load(key)
    for other in ("a" * 32, "b" * 32):
        device_cache.store(other, compiled)
    os.utime(cache_folder / ("a" * 32) / device_cache.ENTRY, (1, 1))     # the oldest use
    size = device_cache.entries()[0]["bytes"]
    assert device_cache.trim(max_bytes=2 * size + 1) == ["a" * 32]
    assert {e["key"] for e in device_cache.entries()} == {key, "b" * 32}
    assert device_cache.clear() == 2 and device_cache.entries() == []


def test_the_cli_lists_and_clears_the_cache(tiny_bundle, cache_folder):
    sdk.load(tiny_bundle).warm_up()
    encoder_cache.wait_for_writes()
    env = {**os.environ, device_cache.ENVIRONMENT: str(cache_folder)}
    listed = subprocess.run([sys.executable, "-m", "sdk", "cache", "list"], capture_output=True, text=True, env=env,
                            check=True).stdout
    assert "2 entries" in listed and all(e["key"] in listed for e in device_cache.entries())
    assert "backbone" in listed and "text_encoder" in listed
    cleared = subprocess.run([sys.executable, "-m", "sdk", "cache", "clear"], capture_output=True, text=True,
                             env=env, check=True).stdout
    assert "removed 2 entries" in cleared and device_cache.entries() == []


def test_the_key_changes_with_the_bundle_the_runtime_and_the_cpu(tiny_bundle, monkeypatch):
    import onnxruntime

    sha = sdk.load(tiny_bundle, cache=False).bundle.manifest_sha256
    key = device_cache.entry_key(sha)
    assert device_cache.entry_key("0" * 64) != key
    monkeypatch.setattr(onnxruntime, "__version__", "0.0.0")
    assert device_cache.entry_key(sha) != key
    monkeypatch.undo()
    monkeypatch.setattr(device_cache, "cpu_signature", lambda: "another cpu")
    assert device_cache.entry_key(sha) != key


SECOND_PROCESS = """
import sys
import sdk, sdk.engines.onnxruntime as engine
if sys.argv[2] == "forbid":
    def compile_again(*args, **kwargs):
        raise SystemExit("compiled again instead of reading the cache")
    engine.compile_backbone = compile_again
print(sdk.load(sys.argv[1]).warm_up().engine.route)
"""


def test_a_second_process_takes_the_compiled_backbone_from_the_cache(tiny_bundle, cache_folder):
    env = {**os.environ, device_cache.ENVIRONMENT: str(cache_folder)}
    run = [sys.executable, "-c", SECOND_PROCESS, str(tiny_bundle)]
    first = subprocess.run([*run, "allow"], capture_output=True, text=True, env=env)
    second = subprocess.run([*run, "forbid"], capture_output=True, text=True, env=env)
    assert first.stdout.strip() == second.stdout.strip() == "compiled", (first.stderr[-500:], second.stderr[-500:])
    fresh = subprocess.run([*run, "forbid"], capture_output=True, text=True, env={**env, device_cache.ENVIRONMENT: "0"})
    assert fresh.returncode != 0 and "compiled again" in fresh.stderr     # the check itself can fail


def test_trim_removes_the_staging_folders_of_killed_writes_but_not_a_live_one(cache_folder):
    dead, live = cache_folder / f".{'c' * 32}.0badf00d.tmp", cache_folder / f".{'d' * 32}.0000beef.tmp"
    for folder in (dead, live):
        folder.mkdir(parents=True)
        (folder / "encoder.weights").write_bytes(b"x" * 1000)
    old = os.stat(dead).st_mtime - device_cache.STALE_STAGING_S - 1
    os.utime(dead, (old, old))
    device_cache.trim()
    assert not dead.exists() and live.is_dir() and device_cache.entries() == []


def _int8_graphs_and_logits(bundle) -> tuple[list[bytes], list[np.ndarray]]:
    image = list(np.random.default_rng(3).integers(0, 255, (2, 32, 32, 3), np.uint8))
    models = [sdk.personalize(bundle, d, precision="int8") for d in ("rings", "red disc, green stripes")]
    return [m.int8_graph for m in models], [m.logits(image) for m in models]


def test_the_int8_route_is_stored_once_checked_and_taken_by_the_next_load_as_it_was(tiny_bundle, cache_folder,
                                                                                    monkeypatch):
    """sdk/engines/int8_route_cache.py: the first int8 model's route (here cut in two: MIN_SPLIT_BYTES lowered) is
    stored; a later load takes it without optimizing anything, cut where it was, and its models are the
    first load's to the bit; with threads=1 the same entry serves whole."""
    from sdk.engines import int8_route_cache, int8_session

    monkeypatch.setattr(int8_session, "MIN_SPLIT_BYTES", 0)
    first = sdk.load(tiny_bundle)
    want = _int8_graphs_and_logits(first)
    made = first.engine.int8_sessions
    assert made.name == "optimized once, in two halves"
    assert [e["kind"] for e in device_cache.entries()].count("int8_route") == 1

    def never(*args, **kwargs):
        raise AssertionError("the route was made again")

    monkeypatch.setattr(int8_session, "optimized_int8_sessions", never)
    monkeypatch.setattr("sdk.engines.onnxruntime.optimized_int8_sessions", never)
    again = sdk.load(tiny_bundle)
    got = _int8_graphs_and_logits(again)
    route = again.engine.int8_sessions
    assert route.name == made.name and route.cut == made.cut and route.optimized == made.optimized
    assert got[0] == want[0] and all(np.array_equal(a, b) for a, b in zip(got[1], want[1], strict=True))
    whole = sdk.load(tiny_bundle, threads=1)
    assert np.array_equal(_int8_graphs_and_logits(whole)[1][0], want[1][0])
    assert whole.engine.int8_sessions.name == "optimized once"
    key = int8_route_cache.entry_key(first.engine.cache_key)
    assert (cache_folder / key).is_dir() and sdk.load(tiny_bundle, cache=False).engine.cache_key is None


@pytest.mark.parametrize("damage", ["graph", "entry", "layout", "cut"])
def test_a_damaged_int8_route_entry_is_made_anew_not_trusted(tiny_bundle, cache_folder, damage):
    import json

    from sdk.engines import int8_route_cache

    want = _int8_graphs_and_logits(sdk.load(tiny_bundle))
    key = int8_route_cache.entry_key(sdk.load(tiny_bundle).engine.cache_key)
    folder = cache_folder / key
    original = (folder / device_cache.ENTRY).read_text()
    entry = json.loads(original)
    if damage == "graph":
        raw = bytearray((folder / int8_route_cache.GRAPH).read_bytes())
        raw[len(raw) // 2] ^= 0x40
        (folder / int8_route_cache.GRAPH).write_bytes(bytes(raw))
    elif damage == "entry":
        (folder / device_cache.ENTRY).write_text("{not json")
    else:   # an entry of another int8 graph than this plan writes; a cut that is no node index
        entry.update(layout="0" * 64) if damage == "layout" else entry.update(cut="after the stem")
        (folder / device_cache.ENTRY).write_text(json.dumps(entry))
    bundle = sdk.load(tiny_bundle)
    got = _int8_graphs_and_logits(bundle)   # made anew (and stored again), not taken from the damaged entry
    assert bundle.engine.int8_sessions.name == "optimized once"
    assert got[0] == want[0] and all(np.array_equal(a, b) for a, b in zip(got[1], want[1], strict=True))
    assert (folder / device_cache.ENTRY).read_text() == original   # the entry written again, as it was
