"""Compress trained bases into a compact bundle's storage (`sdk.fusion.bases`), for bundles trained without gates.

A mode is a `+`-joined list of options (`python -m export bundle RUN --out F --mode drop:0.02+lowrank:8+fp16`):

- `fp32`: the Q bases as they are (`full` layers, float32): today's bytes, the reference.
- `fp16`: float16 storage (alone: the Q full bases in float16).
- `delta`: a shared W_0 (the mean of the bases) plus dense per-basis deltas.
- `int8`: deltas in int8 with one float32 scale per output channel (shared by the bases).
- `lowrank:R`: deltas of rank R (truncated SVD of each basis's delta, the weight reshaped [O, n]).
- `subspace:R`: deltas of rank R in one shared row space (truncated SVD of the Q deltas stacked
  [Q O, n]): D_q = U_q V. Fusing costs one GEMM of inner size R instead of Q R.
- `drop:T`: layers whose largest relative delta, max_q ||D_q|| / ||W_0|| of the weight, is below T are
  `shared` (every basis's weight and batch norm replaced by the mean): personalize() never touches them.

Any option but `fp32`/`fp16` implies a shared W_0. With W_0 the mean of the bases and alpha rows summing
to one, `delta` in float32 mixes to exactly what the plain bases mix to.

>>> Mode.parse("drop:0.02+lowrank:8+fp16")
Mode(dtype='float16', kind='lowrank', rank=8, drop=0.02)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from sdk.fusion.bases import RANKED_KINDS, CompactBases, LayerBases, LayerStorage


@dataclass(frozen=True)
class Mode:
    dtype: str = "float32"
    kind: str = "full"          # how layers with deltas are stored: full | dense | int8 | lowrank | subspace
    rank: int = 0
    drop: float = 0.0

    @classmethod
    def parse(cls, text: str) -> Mode:
        """ValueError for an unknown or contradictory option."""
        options = [t.strip() for t in text.split("+") if t.strip()]
        if not options:
            raise ValueError("empty mode")
        dtype, kinds, rank, drop = "float32", set(), 0, 0.0
        for option in options:
            name, _, value = option.partition(":")
            if name in ("fp32", "fp16") and not value:
                dtype = "float16" if name == "fp16" else dtype
                if name == "fp32" and len(options) > 1:
                    raise ValueError("'fp32' is the plain bases and combines with nothing")
            elif name in ("delta", "int8") and not value:
                kinds.add(name)
            elif name in RANKED_KINDS and value.isdigit() and int(value) > 0:
                kinds.add(name)
                rank = int(value)
            elif name == "drop" and _is_fraction(value):
                drop = float(value)
            else:
                raise ValueError(f"unknown mode option {option!r} (fp32, fp16, delta, int8, lowrank:R, subspace:R, "
                                 "drop:T)")
        storage = kinds - {"delta"}
        if len(storage) > 1:
            raise ValueError(f"choose one delta storage, not {sorted(storage)}")
        kind = storage.pop() if storage else "dense" if kinds or drop else "full"
        return cls(dtype, kind, rank, drop)

    def __str__(self) -> str:
        parts = [] if self.kind == "full" else [{"dense": "delta", "int8": "int8"}.get(self.kind,
                                                                                     f"{self.kind}:{self.rank}")]
        if self.drop:
            parts.insert(0, f"drop:{self.drop:g}")
        if self.dtype == "float16":
            parts.append("fp16")
        return "+".join(parts) or "fp32"


def _is_fraction(value: str) -> bool:
    try:
        return 0 <= float(value) < 1 and math.isfinite(float(value))
    except ValueError:
        return False


def relative_delta(weights: np.ndarray) -> float:
    """max_q ||W_q - mean|| / ||mean|| of one layer's weights [Q, O, n]."""
    base = weights.mean(0)
    return float(np.linalg.norm((weights - base).reshape(len(weights), -1), axis=1).max()
                 / max(float(np.linalg.norm(base)), 1e-12))


def compress(bases: CompactBases, mode: Mode, shared: set[str] | None = None) -> CompactBases:
    """`bases` (full float32, e.g. `CompactBases.full(...)`) stored as `mode` says. `shared`: layer names
    stored without deltas whatever their size (to give random timing bases a measured pattern)."""
    layers = []
    for lb in bases.layers:
        weights = np.stack([lb.base() + lb.delta_of(q) for q in range(bases.num_bases)])   # [Q, O, n]
        channels = np.broadcast_to(lb.parts["channels"], (bases.num_bases, *lb.parts["channels"].shape[1:]))
        forced = lb.layer.name in (shared or ()) and mode.kind != "full"
        layer_mode = replace(mode, drop=1.0) if forced else mode
        layers.append(_compress_layer(lb, weights, np.ascontiguousarray(channels, np.float32), layer_mode))
    return CompactBases(layers, bases.shapes, bases.num_bases)


def _compress_layer(lb: LayerBases, weights: np.ndarray, channels: np.ndarray, mode: Mode) -> LayerBases:
    f = np.float16 if mode.dtype == "float16" else np.float32
    if mode.kind == "full":
        parts = {"channels": channels, "weight": weights.astype(f)}
        return LayerBases(lb.layer, LayerStorage("full", mode.dtype), parts)
    base = weights.mean(0)
    if mode.drop >= 1 or relative_delta(weights) < mode.drop:
        return LayerBases(lb.layer, LayerStorage("shared", mode.dtype),
                          {"channels": channels.mean(0, keepdims=True), "base": base.astype(f)})
    # The deltas are taken against the base as stored, so float16 rounding of W_0 goes into them.
    delta = weights - base.astype(f).astype(np.float32)
    parts = {"channels": channels, "base": base.astype(f)}
    if mode.kind == "dense":
        parts["delta"] = delta.astype(f)
        return LayerBases(lb.layer, LayerStorage("dense", mode.dtype), parts)
    if mode.kind == "int8":
        scale = np.abs(delta).max(axis=(0, 2)) / 127
        safe = np.where(scale > 0, scale, 1)[None, :, None]
        parts["delta"] = np.clip(np.rint(delta / safe), -127, 127).astype(np.int8)
        parts["scale"] = scale.astype(np.float32)
        return LayerBases(lb.layer, LayerStorage("int8", mode.dtype), parts)
    rank = min(mode.rank, lb.layer.rows, lb.layer.columns)
    if mode.kind == "subspace":
        u, s, vt = top_singular(delta.reshape(1, -1, delta.shape[2]), rank)   # the Q deltas stacked: [1, Q O, n]
        root = np.sqrt(s[0])
        parts["u"] = (u[0] * root).reshape(delta.shape[0], delta.shape[1], -1).astype(f)
        parts["v"] = (root[:, None] * vt[0]).astype(f)
        return LayerBases(lb.layer, LayerStorage("subspace", mode.dtype, rank), parts)
    u, s, vt = top_singular(delta, rank)
    root = np.sqrt(s)                                              # split evenly: both factors stay in fp16 range
    parts["u"] = (u * root[:, None, :]).astype(f)
    parts["v"] = (root[:, :, None] * vt).astype(f)
    return LayerBases(lb.layer, LayerStorage("lowrank", mode.dtype, rank), parts)


EXACT_SVD_MAX = 256   # min(O, n) up to which the full SVD is cheap (bench-width layers: at most 128)


def top_singular(matrices: np.ndarray, rank: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The top-`rank` singular triplets of each of `matrices` [Q, O, n]: u [Q, O, r], s [Q, r], vt [Q, r, n].
    Exact SVD for small layers; for larger ones a randomized range finder with oversampling and two power
    iterations (Halko et al. 2011): with full SVDs, `lowrank:4` of a full-width ResNet-18 with Q=10 took
    260 s here (21 layers)."""
    if min(matrices.shape[1:]) <= EXACT_SVD_MAX:
        u, s, vt = np.linalg.svd(matrices, full_matrices=False)
        return u[:, :, :rank], s[:, :rank], vt[:, :rank]
    rng = np.random.default_rng(seed)
    probe = rng.standard_normal((matrices.shape[2], rank + 10)).astype(np.float32)
    basis = np.linalg.qr(matrices @ probe)[0]                                   # [Q, O, r + 10]
    for _ in range(2):
        basis = np.linalg.qr(matrices @ (matrices.transpose(0, 2, 1) @ basis))[0]
    small_u, s, vt = np.linalg.svd(basis.transpose(0, 2, 1) @ matrices, full_matrices=False)
    return (basis @ small_u)[:, :, :rank], s[:, :rank], vt[:, :rank]


__all__ = ["Mode", "compress", "relative_delta"]
