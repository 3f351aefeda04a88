"""Vetting an ExecuTorch companion before this process's ExecuTorch reads it.

The SDK checks everything of a companion that it parses itself (`sdk.engines.xnnpack_program`: header, sizes,
checksum, slots), but the program's operators are parsed by ExecuTorch's flatbuffer reader and
XNNPACK's graph compiler, native code that does not survive every malformed input: a program edited
with its checksum redone (which needs no key) can end the process with SIGSEGV or SIGABRT at the first
`forward` (issue 63), and another edit can load and predict something else than the bundle's weights
would. Those two parsers are not ours to make safe, so the choice is explicit:

- A companion whose signer the caller trusts (`sdk.load(..., trusted_keys=...)`) is not probed: the
  signature vouches for the program, as it does for the bundle.
- Any other companion (unsigned, or signed by a key nobody named) is run first in a child process: the
  program, personalized with a fixed mixer, is loaded and run on a probe input there. A child that dies
  (a signal), hangs (PROBE_TIMEOUT_S) or fails is a BundleError naming what happened, and so is a probe
  output that differs from the onnxruntime engine's for the same weights by more than the tolerance
  the engine's own compiled route is held to (`sdk.engines.onnxruntime.BackboneEngine.compile`).
- The verdict is kept per process, and, with the device cache on, in its folder (`python -m sdk cache
  clear` empties it), keyed by the program's and the bundle's SHA-256 and the executorch version: a
  companion is probed once per machine. The cost
  (a Python process that imports torch and executorch) is in docs/results/companion_check.md
  (scripts/bench_companion_check.py).

Since the structure of every personalized program is the probed one (personalization writes only the
weight slots, which hold plain float32 values), a program that passed runs in this process afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

from sdk.errors import BundleError

PROBE_TIMEOUT_S = 120.0
PROBE_BATCH = 2
_verdicts: set[str] = set()      # keys of programs that passed in this process
_lock = threading.Lock()


def probe_key(program: bytes, bundle_sha256: str) -> str:
    """The verdict's key: the companion's program, the bundle it is checked against, executorch's version."""
    try:
        from importlib.metadata import version

        executorch = version("executorch")
    except Exception:  # no metadata: the key still separates programs and bundles
        executorch = "unknown"
    fields = {"program": hashlib.sha256(program).hexdigest(), "bundle": bundle_sha256, "executorch": executorch}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]


def verdict_file(key: str) -> Path | None:
    """Where a passed verdict is kept between processes: a small file in the device cache's folder (which
    `python -m sdk cache clear` empties), or None when the device cache is off (`TAPER_DEVICE_CACHE=0`)."""
    from sdk.engines import device_cache

    return device_cache.cache_dir() / f"companion-check-{key}" if device_cache.enabled() else None


def passed_before(key: str, use_disk: bool) -> bool:
    with _lock:
        if key in _verdicts:
            return True
    path = verdict_file(key) if use_disk else None
    if path is not None and path.is_file():
        with _lock:
            _verdicts.add(key)
        return True
    return False


def remember(key: str, use_disk: bool) -> None:
    with _lock:
        _verdicts.add(key)
    path = verdict_file(key) if use_disk else None
    if path is not None:
        from sdk.media.files import atomic_file

        try:
            with atomic_file(path) as f:
                f.write(b"passed\n")
        except Exception:  # a cache that cannot be written only costs the next process a probe
            pass


def probe_in_child(program: bytes, images: np.ndarray, timeout: float = PROBE_TIMEOUT_S) -> np.ndarray:
    """The features `program` computes for `images` [N, 3, S, S], run by ExecuTorch in a child process;
    BundleError if the child dies, hangs or fails."""
    header = json.dumps({"shape": list(images.shape)}).encode()
    message = len(header).to_bytes(4, "little") + header + np.ascontiguousarray(images, np.float32).tobytes() + program
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    try:
        done = subprocess.run([sys.executable, "-m", "sdk.engines.companion_probe"], input=message, capture_output=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise BundleError(f"the ExecuTorch companion's program hung ExecuTorch in a probe process (no answer in "
                          f"{timeout:.0f} s): refused") from None
    except OSError as e:
        raise BundleError(f"the ExecuTorch companion could not be checked: no probe process ({e})") from None
    if done.returncode < 0:
        raise BundleError(f"the ExecuTorch companion's program crashed ExecuTorch in a probe process (signal "
                          f"{-done.returncode}): it is damaged or hostile, refused (this process was not touched)")
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        raise BundleError(f"the ExecuTorch companion's program failed in a probe process: {reason[0][:300]}")
    expected = images.shape[0] * 4
    if len(done.stdout) < 4 or len(done.stdout) % expected:
        raise BundleError("the ExecuTorch companion's program gave a malformed answer in a probe process")
    return np.frombuffer(done.stdout, np.float32).reshape(images.shape[0], -1)


def check_companion(route, standard, alpha: np.ndarray, input_size: int, bundle_sha256: str,
                    use_disk: bool) -> None:
    """Probe `route`'s program (an ExecutorchRoute) personalized with `alpha` [4, Q], as the module
    docstring says, unless it passed before; BundleError if it crashes, hangs, fails, or disagrees with
    `standard` (the onnxruntime route) on the same weights."""
    key = probe_key(route.companion.program, bundle_sha256)
    if passed_before(key, use_disk):
        return
    target = route.new_buffer()
    route.fuse_and_fold(alpha, target)
    program = target.graph_data.view(np.uint8)[:len(route.companion.program)].tobytes()
    batch = min(PROBE_BATCH, route.companion.max_batch)
    images = np.random.default_rng(0).standard_normal([batch, 3, input_size, input_size]).astype(np.float32)
    features = probe_in_child(program, images)
    head_weight, head_bias = target.head
    if features.shape[1] != head_weight.shape[1]:
        raise BundleError(f"the ExecuTorch companion's program gives {features.shape[1]} features, the bundle's "
                          f"classifier takes {head_weight.shape[1]}")
    got = features @ head_weight.T + head_bias
    reference = standard.new_buffer()
    standard.fuse_and_fold(alpha, reference)
    expected = standard.open(reference, *reference.head).run(images)
    tolerance = 1e-4 * (float(np.abs(expected).max()) + 1)
    worst = float(np.abs(got - expected).max()) if np.isfinite(got).all() else float("inf")
    if not worst <= tolerance:
        raise BundleError(f"the ExecuTorch companion's program predicts differently from its bundle (logits differ "
                          f"by up to {worst:.3g} on a probe input, tolerance {tolerance:.2g}): damaged or edited, "
                          "refused")
    remember(key, use_disk)
