"""The bases of a bundle, layer by layer: a shared part W_0 plus per-basis deltas (format versions 3 to 6).

Basis q's weight of a layer (`sdk.fusion.architecture.Layer`: a conv or the classifier) is W_0 + D_q. With
alpha rows summing to one the mixed weight is W_0 + sum_q alpha_q D_q, so fusing reads W_0 once and
only the deltas that are stored. Each layer is stored in one of these kinds (its `LayerStorage` in
the manifest; tensors `<layer>.<part>` in the `bases.safetensors` member):

| kind      | tensors                                          | weight of basis q              |
|-----------|--------------------------------------------------|--------------------------------|
| `full`    | `weight` [Q, O, n]                               | weight[q] (no W_0: plain bases) |
| `shared`  | `base` [O, n]                                    | base, for every basis          |
| `dense`   | `base` [O, n], `delta` [Q, O, n]                 | base + delta[q]                |
| `int8`    | `base`, `delta` int8 [Q, O, n], `scale` [O]      | base + scale[:, None] * delta[q] |
| `lowrank` | `base`, `u` [Q, O, r], `v` [Q, r, n]             | base + u[q] @ v[q]             |
| `subspace`| `base`, `u` [Q, O, r], `v` [r, n]                | base + u[q] @ v                |

plus `channels`, float32 [Q, c, O]: the per-output-channel tensors (batch-norm weight, bias, running
mean, running variance; or the classifier's bias), one row [1, c, O] for a shared layer. O is the
number of output channels, n the rest of the weight's size. Floats are float32 or float16 (`dtype`);
an int8 scale is float32, per output channel, shared by the bases. `subspace` is low rank with the
right factor shared: every basis's delta lies in the same r rows, so the mix is (sum_q alpha_q u[q]) @ v,
one GEMM of inner size r where `lowrank` needs Q r (and at equal bytes it fits the deltas better on the
bench run: docs/results/experiments.md).

The arrays are read-only views into the bundle. `mixed` is the reference fusion (dequantize, then
sum); the runtime's fast kernels (`sdk.fusion.plan`) are tested against it.

>>> from sdk.fusion.architecture import parameter_shapes
>>> shapes = parameter_shapes("small", 0.25, 10)
>>> bases = CompactBases.random(shapes, num_bases=3, seed=0)
>>> bases.mixed(np.full((4, 3), 1 / 3, np.float32))["fc.weight"].shape
(10, 128)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from sdk.errors import BundleError
from sdk.fusion.architecture import Layer, block_layout, mixed_layers

VERIFY_CHUNK_FLOATS = 1 << 22
RANKED_KINDS = ("lowrank", "subspace")   # kinds stored as factors of a rank
LAYER_KINDS = ("full", "shared", "dense", "int8", "lowrank", "subspace")   # the kinds of the table above
FLOAT_DTYPES = {"float32": "<f4", "float16": "<f2"}


@dataclass(frozen=True)
class LayerStorage:
    """How one layer's bases are stored (the manifest's `layers` entry): `kind`, the dtype of its float
    tensors, and for `lowrank` and `subspace` the rank of the deltas (0 otherwise)."""
    kind: str
    dtype: str
    rank: int = 0


def _float(dtype: str) -> np.dtype:
    return np.dtype(FLOAT_DTYPES[dtype])


def expected_tensors(layer: Layer, storage: LayerStorage, num_bases: int) -> dict[str, tuple[np.dtype, tuple]]:
    """The tensors (part -> dtype, shape) a layer stored as `storage` has."""
    q, o, n, f = num_bases, layer.rows, layer.columns, _float(storage.dtype)
    parts = {"channels": (np.dtype(np.float32), (1 if storage.kind == "shared" else q, len(layer.channels), o))}
    if storage.kind == "full":
        parts["weight"] = (f, (q, o, n))
    else:
        parts["base"] = (f, (o, n))
    if storage.kind == "dense":
        parts["delta"] = (f, (q, o, n))
    elif storage.kind == "int8":
        parts["delta"] = (np.dtype(np.int8), (q, o, n))
        parts["scale"] = (np.dtype(np.float32), (o,))
    elif storage.kind == "lowrank":
        parts["u"] = (f, (q, o, storage.rank))
        parts["v"] = (f, (q, storage.rank, n))
    elif storage.kind == "subspace":
        parts["u"] = (f, (q, o, storage.rank))
        parts["v"] = (f, (storage.rank, n))
    return parts


@dataclass(frozen=True)
class LayerBases:
    """One layer's stored tensors (`parts`: part name -> array, see the module's table)."""
    layer: Layer
    storage: LayerStorage
    parts: Mapping[str, np.ndarray]

    @property
    def kind(self) -> str:
        return self.storage.kind

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.parts.values())

    def delta_of(self, q: int) -> np.ndarray:
        """D_q as float32 [O, n] (the stored weight itself for `full`; zeros for `shared`)."""
        p, kind = self.parts, self.kind
        if kind == "full":
            return p["weight"][q].astype(np.float32)
        if kind == "shared":
            return np.zeros((self.layer.rows, self.layer.columns), np.float32)
        if kind == "dense":
            return p["delta"][q].astype(np.float32)
        if kind == "int8":
            return p["scale"][:, None] * p["delta"][q].astype(np.float32)
        v = p["v"] if kind == "subspace" else p["v"][q]
        return p["u"][q].astype(np.float32) @ v.astype(np.float32)

    def base(self) -> np.ndarray:
        """W_0 as float32 [O, n] (zeros for `full`)."""
        if self.kind == "full":
            return np.zeros((self.layer.rows, self.layer.columns), np.float32)
        return self.parts["base"].astype(np.float32)

    def mixed_weight(self, alpha: np.ndarray) -> np.ndarray:
        """W_0 + sum_q alpha[q] D_q, [O, n] float32: the reference (dequantizes every delta)."""
        out = self.base()
        if self.kind != "shared":
            for q, a in enumerate(alpha):
                out += np.float32(a) * self.delta_of(q)
        return out

    def mixed_channels(self, alpha: np.ndarray) -> np.ndarray:
        """The per-output-channel tensors mixed with alpha [Q]: [c, O] float32."""
        channels = self.parts["channels"]
        if self.kind == "shared":
            return np.array(channels[0])
        return np.tensordot(alpha.astype(np.float32), channels, axes=1)


class CompactBases:
    """Every layer's stored bases (`layers`, in state-dict order), validated against the architecture."""

    def __init__(self, layers: list[LayerBases], shapes: Mapping[str, tuple[int, ...]], num_bases: int):
        self.layers, self.shapes, self.num_bases = layers, dict(shapes), num_bases

    @classmethod
    def from_tensors(cls, tensors: Mapping[str, np.ndarray], storage: Mapping[str, LayerStorage],
                     shapes: Mapping[str, tuple[int, ...]], num_bases: int) -> CompactBases:
        """Check that `tensors` are exactly what `storage` says for every layer (names, dtypes, shapes);
        BundleError otherwise."""
        layers, expected_names = [], set()
        for layer in mixed_layers(shapes):
            if layer.name not in storage:
                raise BundleError(f"bases: layer {layer.name!r} has no storage entry")
            spec = storage[layer.name]
            parts = {}
            for part, (dtype, shape) in expected_tensors(layer, spec, num_bases).items():
                key = f"{layer.name}.{part}"
                expected_names.add(key)
                t = tensors.get(key)
                if t is None:
                    raise BundleError(f"bases: tensor {key!r} is missing (layer stored as {spec.kind})")
                if t.dtype != dtype or tuple(t.shape) != shape:
                    raise BundleError(f"bases: tensor {key!r} is {t.dtype} {tuple(t.shape)}, expected {dtype} {shape}")
                parts[part] = t
            layers.append(LayerBases(layer, spec, parts))
        extra = sorted(set(tensors) - expected_names)
        if extra or set(storage) != {layer.layer.name for layer in layers}:
            unknown = extra or sorted(set(storage) - {layer.layer.name for layer in layers})
            raise BundleError(f"bases: {unknown[:3]} belong to no layer of the architecture")
        return cls(layers, shapes, num_bases)

    @property
    def storage(self) -> dict[str, LayerStorage]:
        return {lb.layer.name: lb.storage for lb in self.layers}

    @property
    def nbytes(self) -> int:
        return sum(lb.nbytes for lb in self.layers)

    def tensors(self) -> dict[str, np.ndarray]:
        """Every stored tensor by its member name (what the writer stores)."""
        return {f"{lb.layer.name}.{part}": array for lb in self.layers for part, array in lb.parts.items()}

    def verify_finite(self) -> None:
        """BundleError if a float is NaN or infinite, an int8 scale negative, or a batch norm's running variance
        negative (a mixture of the bases is convex, so non-negative variances stay non-negative; one negative
        variance makes every output NaN, which no checksum can catch in a re-signed bundle)."""
        for lb in self.layers:
            for part, array in lb.parts.items():
                if array.dtype.kind != "f":
                    continue
                flat = array.reshape(-1)
                for start in range(0, flat.size, VERIFY_CHUNK_FLOATS):
                    if not np.isfinite(flat[start:start + VERIFY_CHUNK_FLOATS]).all():
                        raise BundleError(f"bases: {lb.layer.name}.{part} holds NaN or infinite values")
            if lb.kind == "int8" and (lb.parts["scale"] < 0).any():
                raise BundleError(f"bases: {lb.layer.name}.scale holds negative scales")
            for i, name in enumerate(lb.layer.channels):
                if name.endswith("running_var") and (lb.parts["channels"][:, i] < 0).any():
                    raise BundleError(f"bases: {name} holds negative running variances")

    def mixed(self, alpha: np.ndarray) -> dict[str, np.ndarray]:
        """Every mixed tensor by state-dict name, float32, for alpha [4, Q] (the reference fusion)."""
        alpha = np.asarray(alpha, np.float32)
        out = {}
        for lb in self.layers:
            a = alpha[lb.layer.block]
            out[lb.layer.weight] = lb.mixed_weight(a).reshape(lb.layer.shape)
            for name, row in zip(lb.layer.channels, lb.mixed_channels(a), strict=True):
                out[name] = row
        return out

    def mixed_channels(self, alpha: np.ndarray) -> dict[str, np.ndarray]:
        """Every per-channel tensor (batch norms, the classifier's bias) mixed with alpha [4, Q], by name:
        the cheap part of `mixed` (what `sdk.engines.int8` reads its activation ranges from)."""
        alpha = np.asarray(alpha, np.float32)
        return {name: row for lb in self.layers
                for name, row in zip(lb.layer.channels, lb.mixed_channels(alpha[lb.layer.block]), strict=True)}

    @property
    def classifier(self) -> LayerBases:
        """The classifier's stored bases (the one layer without batch norm)."""
        return next(lb for lb in self.layers if lb.layer.batch_norm is None)

    def mixed_head(self, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The classifier alone mixed with alpha [4, Q]: weight [classes, C] and bias [classes] (the
        reference fusion of that one layer)."""
        fc = self.classifier
        a = np.asarray(alpha, np.float32)[fc.layer.block]
        return fc.mixed_weight(a).reshape(fc.layer.shape), fc.mixed_channels(a)[0]

    def block_rows(self) -> list[np.ndarray]:
        """Every basis in full, float32 [Q, P_b] per mixer block in `block_layout` order (what the
        trainer's basis bank holds: for evaluating a compressed bundle)."""
        per_name = {}
        for lb in self.layers:
            base = lb.base()
            per_name[lb.layer.weight] = np.stack([base + lb.delta_of(q) for q in range(self.num_bases)])
            channels = np.broadcast_to(lb.parts["channels"], (self.num_bases, *lb.parts["channels"].shape[1:]))
            for i, name in enumerate(lb.layer.channels):
                per_name[name] = channels[:, i]
        return [np.concatenate([per_name[n].reshape(self.num_bases, -1) for n in names], axis=1).astype(np.float32)
                for names in block_layout(self.shapes)]

    @classmethod
    def full(cls, block_rows: list[np.ndarray], shapes: Mapping[str, tuple[int, ...]]) -> CompactBases:
        """Plain float32 bases ([Q, P_b] per block, `block_layout` order) as `full` layers, unchanged."""
        num_bases = int(block_rows[0].shape[0])
        per_name = {}
        for row, names in zip(block_rows, block_layout(shapes), strict=True):
            offset = 0
            for name in names:
                size = math.prod(shapes[name])
                per_name[name] = row[:, offset:offset + size]
                offset += size
        layers = []
        for layer in mixed_layers(shapes):
            weight = np.ascontiguousarray(per_name[layer.weight].reshape(num_bases, layer.rows, layer.columns),
                                          np.float32)
            channels = np.ascontiguousarray(np.stack([per_name[n] for n in layer.channels], axis=1), np.float32)
            parts = {"channels": channels, "weight": weight}
            layers.append(LayerBases(layer, LayerStorage("full", "float32", 0), parts))
        return cls(layers, shapes, num_bases)

    @classmethod
    def random(cls, shapes: Mapping[str, tuple[int, ...]], num_bases: int, seed: int = 0) -> CompactBases:
        """Random full bases with valid batch-norm statistics (variance > 0), for tests and timing."""
        rng = np.random.default_rng(seed)
        rows = []
        for names in block_layout(shapes):
            parts = []
            for name in names:
                size = math.prod(shapes[name])
                values = rng.standard_normal((num_bases, size)).astype(np.float32) * 0.1
                if name.endswith("running_var"):
                    values = np.abs(values) + 0.5
                parts.append(values)
            rows.append(np.concatenate(parts, axis=1))
        return cls.full(rows, shapes)


__all__ = ["CompactBases", "LayerBases", "LayerStorage", "expected_tensors"]
