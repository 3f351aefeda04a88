"""Warm start: what compiling the backbone for this device computes, kept on disk between processes.

`compile_backbone` (sdk/engines/compiled.py) optimizes the backbone twice with probe weights to learn where each
weight lands in onnxruntime's blocked graph, and the engine then checks the compiled route against the
standard one: most of a full-width warm_up (docs/results/warm_start.md). Its result depends only on the bundle
(its manifest's SHA-256 covers every member), the onnxruntime version and the CPU, so an app pays it at
its first launch only: the entry is stored under `<cache root>/compiled/<key>/` and the next process
reads it instead. The same folder holds the text encoder's entries (sdk/text/encoder_cache.py) and the int8
route's (sdk/engines/int8_route_cache.py), under the same rules, cap and commands; `entries()` tells the kinds apart.

Rules, as for every file the SDK writes:
- the key hashes the manifest's SHA-256 (an encoder's: its graph's), the kind, the onnxruntime and SDK
  versions, this format's version and the CPU (architecture and feature flags), so an entry is never used
  on another CPU or runtime;
- an entry is written all or nothing (a staging folder renamed into place) and only after its route was
  checked against the standard route;
- reading checks every file's SHA-256, size and the entry's fields; anything damaged is removed and
  rebuilt, never trusted, and never an error: the cache can only make warm_up faster;
- the folder is capped (`MAX_BYTES`; least recently used entries go first); `python -m sdk cache list`
  and `python -m sdk cache clear` show and empty it; `sdk.load(path, cache=False)` does not use it, nor
  does any load in a process with `TAPER_DEVICE_CACHE=0` (the test suite's default).

>>> key = entry_key("ab" * 32)                       # doctest: +SKIP
>>> store(key, compiled); load(key) == compiled      # doctest: +SKIP
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import platform
import shutil
import time
from pathlib import Path

import numpy as np

from sdk._version import __version__
from sdk.engines.compiled import CompiledBackbone
from sdk.errors import SdkError
from sdk.format.bundle import tensors_member
from sdk.format.tensorfile import read_tensors
from sdk.fusion.plan import Placement
from sdk.media.cache import atomic_directory, cache_root

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
MAX_BYTES = 512 * 2 ** 20   # the whole folder: a backbone's entry is tens of kB, an encoder's ~97 MB (MiniLM int8)
STALE_STAGING_S = 3600      # a staging folder this old is a write that was killed (sdk.media.files.staging_directory)
ENTRY = "entry.json"
GRAPH = "graph.onnx"
CONSTANTS = "constants.safetensors"   # the optimized weight file's own constants, as (positions, values)
FILES = (GRAPH, CONSTANTS)
ENVIRONMENT = "TAPER_DEVICE_CACHE"   # "0": off for the whole process; a path: the cache folder instead


def enabled() -> bool:
    return os.environ.get(ENVIRONMENT) != "0"


def cache_dir() -> Path:
    """`$TAPER_DEVICE_CACHE` when it names a folder, else `<cache root>/compiled` (sdk.media.cache.cache_root)."""
    where = os.environ.get(ENVIRONMENT)
    return Path(where) if where and where != "0" else cache_root() / "compiled"


@functools.cache   # read once per process: every sdk.load asks for its bundle's key
def cpu_signature() -> str:
    """The machine and its CPU feature flags (Linux: /proc/cpuinfo; elsewhere the platform's description)."""
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith(("flags", "Features")):
                flags = " ".join(sorted(line.split(":", 1)[1].split()))
                break
    except OSError:
        pass
    return f"{platform.machine()} {platform.processor()} {flags}".strip()


def entry_key(content_sha256: str, kind: str = "backbone") -> str:
    """The entry of a bundle's compiled backbone (its manifest's SHA-256), or of another `kind` of
    content (sdk.text.encoder_cache: the encoder graph's SHA-256), on this machine and runtime."""
    import onnxruntime as ort

    fields = {"content_sha256": content_sha256, "kind": kind, "onnxruntime": ort.__version__, "sdk": __version__,
              "format": FORMAT_VERSION, "cpu": cpu_signature()}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]


def store(key: str, compiled: CompiledBackbone) -> None:
    """Write the entry (atomically; an existing one is replaced), then trim the folder to `MAX_BYTES`.
    A cache that cannot be written (read-only home, full disk) is logged and skipped."""
    positions = np.flatnonzero(compiled.constants).astype(np.int64)
    files = {GRAPH: compiled.graph,
             CONSTANTS: tensors_member({"positions": positions, "values": compiled.constants[positions],
                                        "length": np.array([len(compiled.constants)], np.int64)})}
    entry = {"format": FORMAT_VERSION, "key": key,
             "placements": [{"name": p.name, "shape": list(p.shape), "start": p.start,
                             "view": None if p.view is None else [list(p.view[0]), list(p.view[1])]}
                            for p in compiled.placements],
             "inputs": {name: [graph_name, list(shape)] for name, (graph_name, shape) in compiled.inputs.items()},
             "files": {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}}
    try:
        with atomic_directory(cache_dir() / key) as tmp:
            for name, data in files.items():
                (tmp / name).write_bytes(data)
            (tmp / ENTRY).write_text(json.dumps(entry))
        trim()
    except (OSError, SdkError) as e:
        log.debug("device cache not written: %s", e)


def has_entry(key: str) -> bool:
    """Whether an entry is stored under `key` (not whether it is sound: `load` checks that)."""
    return (cache_dir() / key / ENTRY).is_file()


def load(key: str) -> CompiledBackbone | None:
    """The entry, checked; None when there is none or it is damaged (then it is removed)."""
    folder = cache_dir() / key
    if not has_entry(key):
        return None
    try:
        compiled = _read(folder, key)
        os.utime(folder / ENTRY)   # recently used: the last to go when the folder is trimmed
        return compiled
    except (OSError, ValueError, KeyError, TypeError) as e:   # damaged or of another shape: rebuild
        log.debug("device cache entry %s damaged (%s): removed", key, e)
        shutil.rmtree(folder, ignore_errors=True)
        return None


def _read(folder: Path, key: str) -> CompiledBackbone:
    """Each file read once: checked against its SHA-256 in the entry, then parsed from the same bytes."""
    entry = json.loads((folder / ENTRY).read_text())
    if entry.get("format") != FORMAT_VERSION or entry.get("key") != key or set(entry["files"]) != set(FILES):
        raise ValueError("not an entry of this key and format")
    data = {name: (folder / name).read_bytes() for name in FILES}
    for name, raw in data.items():
        if hashlib.sha256(raw).hexdigest() != entry["files"][name]:
            raise ValueError(f"{name}: checksum mismatch")
    tensors, _ = read_tensors(data[CONSTANTS])
    positions, values, (length,) = tensors["positions"], tensors["values"], tensors["length"]
    if positions.dtype != np.int64 or values.dtype != np.float32 or positions.shape != values.shape \
            or (len(positions) and not 0 <= positions.min() <= positions.max() < length):
        raise ValueError("constants out of range")
    constants = np.zeros(int(length), np.float32)
    constants[positions] = values
    placements = [Placement(p["name"], tuple(int(d) for d in p["shape"]), int(p["start"]),
                            None if p["view"] is None else (tuple(p["view"][0]), tuple(p["view"][1])))
                  for p in entry["placements"]]
    inputs = {name: (str(graph_name), tuple(int(d) for d in shape)) for name, (graph_name, shape)
              in entry["inputs"].items()}
    return CompiledBackbone(data[GRAPH], constants, placements, inputs)


def entries() -> list[dict]:
    """Every entry: its key, kind (`backbone`; `text_encoder`: sdk.text.encoder_cache; `int8_route`:
    sdk.engines.int8_route_cache), bytes and when it was last used (newest first)."""
    folders = [f for f in cache_dir().iterdir() if f.is_dir() and not f.name.startswith(".")] \
        if cache_dir().is_dir() else []
    used = {f: (f / ENTRY).stat().st_mtime if (f / ENTRY).exists() else 0.0 for f in folders}
    return [{"key": f.name, "kind": _kind(f), "bytes": sum(x.stat().st_size for x in f.iterdir() if x.is_file()),
             "last_used": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(used[f]))}
            for f in sorted(folders, key=used.get, reverse=True)]


def _kind(folder: Path) -> str:
    try:
        kind = json.loads((folder / ENTRY).read_text()).get("kind", "backbone")
        return kind if isinstance(kind, str) else "damaged"
    except (OSError, ValueError, AttributeError):
        return "damaged"


def trim(max_bytes: int = MAX_BYTES) -> list[str]:
    """Remove the least recently used entries until the folder holds at most `max_bytes`, and the staging
    folders of writes that died (killed mid-write, an hour ago or more); the entries' keys."""
    kept, removed, total = entries(), [], 0
    for e in kept:
        total += e["bytes"]
        if total > max_bytes:
            shutil.rmtree(cache_dir() / e["key"], ignore_errors=True)
            removed.append(e["key"])
    for staging in cache_dir().glob(".*.tmp") if cache_dir().is_dir() else ():
        try:
            if time.time() - staging.stat().st_mtime > STALE_STAGING_S:
                shutil.rmtree(staging, ignore_errors=True)
        except OSError:
            pass
    return removed


def clear() -> int:
    """Remove every entry; how many there were."""
    count = len(entries())
    if cache_dir().is_dir():
        for folder in cache_dir().iterdir():
            shutil.rmtree(folder, ignore_errors=True) if folder.is_dir() else folder.unlink(missing_ok=True)
    return count
