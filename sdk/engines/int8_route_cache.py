"""Warm start for int8 models: a bundle's optimized int8 route (sdk.engines.int8_session), kept on disk.

A bundle's first int8 model makes its route: onnxruntime optimizes the plan's graph and a probe's, the
structures are compared, the graph is cut in two, and the route's logits are checked against a fresh
session's, whole and in halves (~320 ms of a ~390 ms first model at full width, 224 px, on the machine of
docs/runtime.md; ad hoc). What that yields depends only on the bundle, the SDK, onnxruntime and the CPU:
the optimized graph with its values as external data (~34 kB) and where it was cut. So it is stored once
checked, and a later process takes it instead of making it again.

The entry lives beside the compiled backbone's and the text encoder's (sdk.engines.device_cache: the same folder,
cap, `python -m sdk cache list` and `clear`, the same opt-outs), under a key made from the bundle's
backbone key (manifest SHA-256, onnxruntime, SDK, CPU) and this kind. It is written all or nothing, only
after the route passed its checks, and checked when read: its fields, the graph's size and SHA-256, and
that it was made from the graph the plan writes now, every node and every value's place and type
(`Int8Plan.layout_sha256`). A damaged entry is removed and the route made anew: never an error, never
another route than the one checked. Whether the route is cut in two is decided again on reading
(`threads=1` or one core: whole).

>>> route = load(key, plan, threads=None)      # doctest: +SKIP
>>> store(key, route, plan)                      # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil

from sdk.engines import device_cache
from sdk.engines.int8 import Int8Plan
from sdk.engines.int8_session import OptimizedInt8Sessions, SplitInt8Sessions, splits
from sdk.errors import SdkError
from sdk.media.cache import atomic_directory

log = logging.getLogger(__name__)

KIND = "int8_route"
FORMAT_VERSION = 1
GRAPH = "int8_route.onnx"


def entry_key(backbone_key: str) -> str:
    """The int8 route's entry of the bundle whose backbone entry is `backbone_key` (sdk.engines.device_cache)."""
    return device_cache.entry_key(backbone_key, KIND)


def store(key: str, route: OptimizedInt8Sessions | SplitInt8Sessions, plan: Int8Plan) -> None:
    """Write the entry of a checked route (atomically), then trim the folder; a cache that cannot be
    written is logged and skipped."""
    graph = route.optimized
    entry = {"format": FORMAT_VERSION, "key": key, "kind": KIND, "cut": route.cut, "layout": plan.layout_sha256,
             "files": {GRAPH: {"bytes": len(graph), "sha256": hashlib.sha256(graph).hexdigest()}}}
    try:
        with atomic_directory(device_cache.cache_dir() / key) as tmp:
            (tmp / GRAPH).write_bytes(graph)
            (tmp / device_cache.ENTRY).write_text(json.dumps(entry))
        device_cache.trim()
    except (OSError, SdkError) as e:
        log.debug("int8 route cache entry not written: %s", e)


def load(key: str, plan: Int8Plan, threads: int | None) -> OptimizedInt8Sessions | SplitInt8Sessions | None:
    """The stored route, checked (see the module docstring); None when there is none or it is damaged
    (then it is removed)."""
    folder = device_cache.cache_dir() / key
    if not device_cache.has_entry(key):
        return None
    try:
        entry = json.loads((folder / device_cache.ENTRY).read_text())
        if entry.get("format") != FORMAT_VERSION or entry.get("key") != key or entry.get("kind") != KIND \
                or set(entry["files"]) != {GRAPH}:
            raise ValueError("not an entry of this key, kind and format")
        if entry["layout"] != plan.layout_sha256:
            raise ValueError("an entry of another int8 graph than the plan writes")
        graph = (folder / GRAPH).read_bytes()
        if {"bytes": len(graph), "sha256": hashlib.sha256(graph).hexdigest()} != entry["files"][GRAPH]:
            raise ValueError(f"{GRAPH}: size or checksum mismatch")
        cut = entry["cut"]
        if cut is not None and (isinstance(cut, bool) or not isinstance(cut, int)):
            raise ValueError("a cut that is not a node index")
        split = cut is not None and splits(threads)
        route = SplitInt8Sessions(graph, cut, threads) if split else OptimizedInt8Sessions(graph, threads)
        os.utime(folder / device_cache.ENTRY)   # recently used: the last to go when the folder is trimmed
        return route
    except Exception as e:  # noqa: BLE001 - damaged or of another shape: the route is made anew
        log.debug("int8 route cache entry %s damaged (%s): removed", key, e)
        shutil.rmtree(folder, ignore_errors=True)
        return None
