"""Warm start for the text encoder: onnxruntime's optimized session of a bundle's encoder, kept on disk.

Creating the encoder's session costs ~135 ms in a fresh process: onnxruntime folds the int8 weights into
float constants, fuses the graph and packs the matrices for its GEMM. It can write that result out, as an
ONNX graph and one external file with the float weights and the packed matrices
(`session.save_external_prepacked_constant_initializers`); a session made from those with the optimizations
off is ready in ~60 ms and gives the same embeddings to the bit (tests/test_encoder_cache.py; the figures:
docs/results/experiments.md, 'Warm start, fourth look', and docs/results/warm_start.md).

The entry lives beside the backbone's (sdk.engines.device_cache: same folder, cap, `python -m sdk cache list` and
`clear`, same opt-outs), keyed by the encoder member's SHA-256, onnxruntime, the SDK and the CPU, so
bundles that ship the same encoder share one entry. It is written all or nothing when a process first
creates the encoder (onnxruntime writes it while creating the session; a thread hashes it and renames it
into place, so the caller does not wait for the digest), and checked when read:
- the entry's fields, and the graph's size and SHA-256, before onnxruntime parses the graph;
- the weight file's size before, and its SHA-256 computed on a second thread while onnxruntime builds the
  session from it (hashlib releases the GIL, so the ~70 ms digest and the ~60 ms load overlap). The
  session is used only if the digest matches; a damaged entry is removed and rebuilt, never an error.

>>> session = cached_session(key, graph, options)     # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import onnxruntime as ort

from sdk.engines import device_cache
from sdk.media.cache import atomic_directory

log = logging.getLogger(__name__)

KIND = "text_encoder"
FORMAT_VERSION = 1
GRAPH, WEIGHTS = "encoder.onnx", "encoder.weights"
PROVIDERS = ["CPUExecutionProvider"]
_writers: list[threading.Thread] = []   # entries this process is finishing (sdk/text/encoder_cache.py `_finish`)


def entry_key(encoder_sha256: str) -> str:
    """The entry of an encoder graph (its SHA-256) on this machine and runtime."""
    return device_cache.entry_key(encoder_sha256, KIND)


def cached_session(key: str, graph: bytes, options: Callable[[], ort.SessionOptions]) -> ort.InferenceSession:
    """The session of `graph` as `options()` makes it, from the entry `key` when it is there and sound;
    otherwise created from `graph` and stored under `key` (a cache that cannot be written is skipped)."""
    folder = device_cache.cache_dir() / key
    session = _load(folder, key, options) if device_cache.has_entry(key) else None
    return session or _create_and_store(folder, key, graph, options) \
        or ort.InferenceSession(graph, options(), providers=PROVIDERS)


def _load(folder: Path, key: str, options: Callable[[], ort.SessionOptions]) -> ort.InferenceSession | None:
    """The entry's session if every check passes; otherwise None, and the entry is removed."""
    try:
        entry = json.loads((folder / device_cache.ENTRY).read_text())
        if entry.get("format") != FORMAT_VERSION or entry.get("key") != key or entry.get("kind") != KIND \
                or set(entry["files"]) != {GRAPH, WEIGHTS}:
            raise ValueError("not an entry of this key, kind and format")
        graph = (folder / GRAPH).read_bytes()
        if _digest(graph) != entry["files"][GRAPH]:
            raise ValueError(f"{GRAPH}: size or checksum mismatch")
        if (folder / WEIGHTS).stat().st_size != entry["files"][WEIGHTS]["bytes"]:
            raise ValueError(f"{WEIGHTS}: size mismatch")
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="taper-encoder-digest") as pool:
            digest = pool.submit(_file_digest, folder / WEIGHTS)   # hashlib releases the GIL: beside the load
            session = _session_from_entry(folder, graph, options)
        if digest.result() != entry["files"][WEIGHTS]:
            raise ValueError(f"{WEIGHTS}: checksum mismatch")
        (folder / device_cache.ENTRY).touch()   # recently used: the last to go when the folder is trimmed
        return session
    except Exception as e:  # noqa: BLE001 - damaged, of another shape, or refused by onnxruntime: rebuild
        log.debug("encoder cache entry %s damaged (%s): removed", key, e)
        shutil.rmtree(folder, ignore_errors=True)
        return None


def _session_from_entry(folder: Path, graph: bytes, options: Callable[[], ort.SessionOptions]):
    opts = options()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL   # optimized when stored
    opts.add_session_config_entry("session.model_external_initializers_file_folder_path", str(folder))
    return ort.InferenceSession(graph, opts, providers=PROVIDERS)


def _create_and_store(folder: Path, key: str, graph: bytes,
                      options: Callable[[], ort.SessionOptions]) -> ort.InferenceSession | None:
    """The session, created while onnxruntime writes its optimized form into a staging folder; a thread
    then hashes it and renames it into place (~75 ms for 97 MB, off the caller's path: `wait_for_writes`).
    None if that failed (the caller then creates the session plainly, so a bad graph gets its own error)."""
    staging = None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}.", suffix=".tmp", dir=folder.parent))  # trim's pattern
        opts = options()
        opts.optimized_model_filepath = str(staging / GRAPH)
        opts.log_severity_level = 3   # not its warning that the stored graph fits this CPU only: the key says so
        opts.add_session_config_entry("session.optimized_model_external_initializers_file_name", WEIGHTS)
        # Small tensors stay in the graph: shape inference must read them (an external shape constant
        # makes the stored graph unloadable).
        opts.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        opts.add_session_config_entry("session.save_external_prepacked_constant_initializers", "1")
        session = ort.InferenceSession(graph, opts, providers=PROVIDERS)
    except Exception as e:  # noqa: BLE001 - full disk, read-only home, or a graph onnxruntime refuses
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        log.debug("encoder cache entry %s not written: %s", key, e)
        return None
    writer = threading.Thread(target=_finish, args=(staging, folder, key), name="taper-encoder-cache")
    writer.start()   # not a daemon: an exiting process waits for it rather than leave a staging folder
    _writers.append(writer)
    return session


def _finish(staging: Path, folder: Path, key: str) -> None:
    """Hash what onnxruntime wrote and put the entry in place, all or nothing."""
    try:
        with atomic_directory(folder) as tmp:
            for name in (GRAPH, WEIGHTS):
                if name == WEIGHTS and not (staging / name).exists():   # no weight big enough to go outside
                    (tmp / name).write_bytes(b"")
                else:
                    os.replace(staging / name, tmp / name)
            entry = {"format": FORMAT_VERSION, "key": key, "kind": KIND,
                     "files": {GRAPH: _digest((tmp / GRAPH).read_bytes()), WEIGHTS: _file_digest(tmp / WEIGHTS)}}
            (tmp / device_cache.ENTRY).write_text(json.dumps(entry))
        device_cache.trim()
    except Exception as e:  # noqa: BLE001 - full disk, a folder removed meanwhile: no entry, nothing else
        log.debug("encoder cache entry %s not written: %s", key, e)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def wait_for_writes() -> None:
    """Return when every entry this process began writing is in place (or was given up)."""
    while _writers:
        _writers.pop().join()


def _digest(data: bytes) -> dict:
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _file_digest(path: Path) -> dict:
    with open(path, "rb") as f:
        digest = hashlib.file_digest(f, "sha256")
        return {"bytes": f.tell(), "sha256": digest.hexdigest()}
