"""The text encoder's warm start (sdk/text/encoder_cache.py): a later process takes onnxruntime's optimized encoder
session from disk; its embeddings are the same to the bit; a damaged entry costs a rebuild, never an error
or a wrong embedding; `cache=False` and an unwritable cache folder leave the encoder as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sdk
from sdk.engines import device_cache
from sdk.text import encoder_cache
from sdk.text.encoder import session_options

PHRASES = ["red disc", "a small blue ring at night", "insects"]


@pytest.fixture()
def cache_folder(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "device-cache"
    monkeypatch.setenv(device_cache.ENVIRONMENT, str(folder))
    return folder


@pytest.fixture(scope="module")
def reference(tiny_bundle) -> np.ndarray:
    """The embeddings of an encoder created from the bundle's graph, no cache involved."""
    return sdk.load(tiny_bundle, cache=False).encoder.encode(PHRASES)


def _entry(cache_folder: Path) -> Path:
    encoder_cache.wait_for_writes()   # the entry is hashed and renamed into place on a thread
    found = [e for e in device_cache.entries() if e["kind"] == encoder_cache.KIND]
    assert len(found) == 1, device_cache.entries()
    return cache_folder / found[0]["key"]


def _forbid_creating(monkeypatch) -> None:
    def create_again(*args, **kwargs):
        raise AssertionError("created from the bundle's graph instead of read from the cache")

    monkeypatch.setattr(encoder_cache, "_create_and_store", create_again)


def test_the_first_encoder_is_stored_and_a_later_one_read_back_identical(tiny_bundle, cache_folder, reference,
                                                                        monkeypatch):
    first = sdk.load(tiny_bundle).encoder.encode(PHRASES)
    folder = _entry(cache_folder)
    entry = json.loads((folder / device_cache.ENTRY).read_text())
    assert entry["kind"] == encoder_cache.KIND and folder.name == encoder_cache.entry_key(
        sdk.load(tiny_bundle, cache=False).bundle.manifest.members["text_encoder.onnx"].sha256)
    assert (folder / encoder_cache.WEIGHTS).stat().st_size == entry["files"][encoder_cache.WEIGHTS]["bytes"] > 0
    assert not list(cache_folder.glob(".*"))   # the staging folder went into place
    _forbid_creating(monkeypatch)
    second = sdk.load(tiny_bundle).encoder.encode(PHRASES)
    assert np.array_equal(first, reference) and np.array_equal(second, reference)


@pytest.mark.parametrize("damage", ["weights", "graph", "truncate", "entry", "key"])
def test_a_damaged_entry_is_rebuilt_never_trusted(tiny_bundle, cache_folder, reference, damage):
    sdk.load(tiny_bundle).encoder   # noqa: B018 - writes the entry
    folder = _entry(cache_folder)
    if damage in ("weights", "graph"):   # a flipped bit that leaves the file loadable
        path = folder / (encoder_cache.WEIGHTS if damage == "weights" else encoder_cache.GRAPH)
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 0x01
        path.write_bytes(bytes(raw))
    elif damage == "truncate":
        path = folder / encoder_cache.WEIGHTS
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size // 2)
    elif damage == "entry":
        (folder / device_cache.ENTRY).write_text("{not json")
    else:   # another encoder's entry under this key
        entry = (folder / device_cache.ENTRY).read_text().replace(folder.name, "f" * 32)
        (folder / device_cache.ENTRY).write_text(entry)
    assert encoder_cache._load(folder, folder.name, session_options) is None and not folder.exists()  # not used
    rebuilt = sdk.load(tiny_bundle).encoder.encode(PHRASES)
    assert np.array_equal(rebuilt, reference) and _entry(cache_folder) == folder     # stored again


def test_the_weights_digest_is_what_refuses_a_flipped_bit(tiny_bundle, cache_folder, monkeypatch):
    """The weight file is hashed while onnxruntime loads it; the check must be able to fail on its own."""
    sdk.load(tiny_bundle).encoder   # noqa: B018
    folder = _entry(cache_folder)
    path = folder / encoder_cache.WEIGHTS
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x01
    path.write_bytes(bytes(raw))
    loaded = []
    real = encoder_cache._session_from_entry
    monkeypatch.setattr(encoder_cache, "_session_from_entry", lambda *a: loaded.append(real(*a)) or loaded[-1])
    assert encoder_cache._load(folder, folder.name, session_options) is None
    assert len(loaded) == 1   # onnxruntime took the damaged file; only the digest refused it


def test_cache_false_and_an_unwritable_folder_leave_the_encoder_as_it_was(tiny_bundle, tmp_path, monkeypatch,
                                                                          reference):
    monkeypatch.setenv(device_cache.ENVIRONMENT, str(tmp_path / "cache"))
    assert np.array_equal(sdk.load(tiny_bundle, cache=False).encoder.encode(PHRASES), reference)
    assert device_cache.entries() == []
    (tmp_path / "a-file").write_bytes(b"")
    monkeypatch.setenv(device_cache.ENVIRONMENT, str(tmp_path / "a-file" / "cache"))   # cannot be a folder
    assert np.array_equal(sdk.load(tiny_bundle).encoder.encode(PHRASES), reference)


SECOND_PROCESS = """
import sys
import sdk, sdk.text.encoder_cache as encoder_cache
if sys.argv[2] == "forbid":
    def create_again(*args, **kwargs):
        raise SystemExit("created the encoder again instead of reading the cache")
    encoder_cache._create_and_store = create_again
print(sdk.load(sys.argv[1]).encoder.encode(["insects"]).tobytes().hex())
"""


def test_a_second_process_takes_the_encoder_from_the_cache(tiny_bundle, cache_folder):
    env = {**os.environ, device_cache.ENVIRONMENT: str(cache_folder)}
    run = [sys.executable, "-c", SECOND_PROCESS, str(tiny_bundle)]
    first = subprocess.run([*run, "allow"], capture_output=True, text=True, env=env)
    second = subprocess.run([*run, "forbid"], capture_output=True, text=True, env=env)
    assert first.returncode == second.returncode == 0, (first.stderr[-500:], second.stderr[-500:])
    assert first.stdout == second.stdout and "Serializing" not in first.stderr   # onnxruntime's warning is off
    fresh = subprocess.run([*run, "forbid"], capture_output=True, text=True, env={**env, device_cache.ENVIRONMENT: "0"})
    assert fresh.returncode == 0 and fresh.stdout == first.stdout      # cache off: neither read nor created
    clean = subprocess.run([*run, "forbid"], capture_output=True, text=True,
                           env={**env, device_cache.ENVIRONMENT: str(cache_folder / "empty")})
    assert clean.returncode != 0 and "created the encoder again" in clean.stderr   # the check itself can fail
