"""The fusion kernel in C (`sdk/_fusion_kernel.c`, built with the package when a compiler is there), behind
the same `FusionKernel` protocol as `sdk.fusion.NumpyKernel`.

numpy fuses a compact layer in five passes (widen, GEMV, int8 scale, + W_0, fold); the C kernel does all
of them in one pass per L1-sized chunk, reading int8 and float16 directly, with the layer's output-channel
blocks split over the cores (ctypes releases the GIL). Low-rank layers in the blocked layout (the compiled
route) get their product in the kernel too, from the mixed left factor and V, rank multiply-adds per
element with the block's lanes in registers; in the plain layout BLAS writes the product into the buffer
and the kernel adds W_0 and folds in place. On x86 the library holds an AVX2+FMA build beside the baseline
one and uses it where the CPU has it (`variant`).

Full-width ResNet-18, Q=10, fuse+fold, sum of the per-layer medians (ad-hoc A/B against the kernel that took
the low-rank product from BLAS through scratch and widened float16 by a table; same machine, same bundles;
docs/results/experiments.md): subspace:16+fp16 58.9 -> 29.4 ms, drop:0.04+subspace:16+fp16 (4 layer4 convs
+ fc) ~36 -> ~17 ms (a 512x4608 conv: 10.3 -> 4.2 ms), drop:0.04+lowrank:8+fp16 60.8 -> 39.5 ms,
drop:0.04+int8+fp16 25.0 -> 22.3 ms, fp32 43.2 -> 40.3 ms. docs/results/bundle.md has the benchmark.

`native_kernel()` loads the library once per process and checks it against numpy on every storage kind
in the plain and both blocked layouts before anything uses it (~0.1 s, at the first `sdk.load`); if the
library is missing or the check fails, it says why at debug level (logger `sdk.native_fusion`) and
returns None (numpy is used). `TAPER_FUSION=numpy` in the environment turns it off (for A/B timing).

>>> kernel = native_kernel()
>>> kernel is None or kernel.name == "native"
True
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .architecture import mixed_layers, parameter_shapes
from .bases import CompactBases, LayerBases, expected_tensors
from .fusion import NUMPY, FusionPlan, LayerPlan, Placement, WeightBuffer, aligned
from .manifest import LayerStorage

log = logging.getLogger(__name__)

LIBRARY = "sdk._fusion_kernel"
TYPES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.int8): 2}
# A layer is split over threads only from this many floats per thread (1 MB of output): smaller layers
# cost less than a hand-off to a pool thread. A chosen size, not a measured optimum.
MIN_FLOATS_PER_THREAD = 1 << 18


class _Layer(ctypes.Structure):
    """Mirrors `taper_layer` in _fusion_kernel.c, field for field."""
    _fields_ = [("first", ctypes.c_int64), ("stop", ctypes.c_int64), ("rows", ctypes.c_int64),
                ("block", ctypes.c_int64), ("q", ctypes.c_int64), ("alpha", ctypes.c_void_p),
                ("deltas", ctypes.c_void_p), ("delta_type", ctypes.c_int64), ("delta_stride", ctypes.c_int64),
                ("product", ctypes.c_void_p), ("left", ctypes.c_void_p), ("right", ctypes.c_void_p),
                ("rank", ctypes.c_int64), ("base", ctypes.c_void_p), ("base_type", ctypes.c_int64),
                ("delta_scale", ctypes.c_void_p), ("fold", ctypes.c_void_p), ("out", ctypes.c_void_p)]


def _pointer(array: np.ndarray | None) -> int | None:
    if array is None:
        return None
    if not array.flags.c_contiguous:
        raise ValueError("the native kernel reads contiguous arrays only")
    return array.ctypes.data


class NativeKernel:
    """One C call per layer part (one tile per layer: the kernel chunks for the cache itself).
    `baseline=True` uses the build for the baseline ISA even where the CPU has AVX2 (for tests)."""
    name = "native"
    tile_floats: int | None = None

    def __init__(self, library: ctypes.CDLL, threads: int | None = None,
                 split_floats: int = MIN_FLOATS_PER_THREAD, baseline: bool = False):
        self._library = library
        self._fuse = library.taper_fuse_layer_baseline if baseline else library.taper_fuse_layer
        self._fuse.argtypes = [ctypes.POINTER(_Layer)]
        self._fuse.restype = ctypes.c_int64
        library.taper_kernel_variant.restype = ctypes.c_int64
        self.variant = "baseline" if baseline or not library.taper_kernel_variant() else "avx2"
        self.threads = max(1, threads or os.cpu_count() or 1)
        self.split_floats = split_floats
        self._pool = ThreadPoolExecutor(self.threads, "taper-fusion") if self.threads > 1 else None

    def scratch_floats(self, layers: list[LayerPlan]) -> int:
        return 0    # low-rank products are computed in the kernel (blocked) or in the buffer (plain)

    def fuse_layer(self, plan: LayerPlan, alpha: np.ndarray, fold: np.ndarray | None, target: WeightBuffer) -> None:
        for tile in plan.tiles:
            self._fuse_tile(plan, tile, alpha, fold, target)

    def _fuse_tile(self, plan, tile, alpha, fold, target) -> None:
        blocks = tile.stop - tile.first
        rows = plan.slab // plan.block
        out = target.data[tile.start:tile.start + tile.size]
        keep = [alpha]
        args = _Layer(0, blocks, rows, plan.block, len(alpha), _pointer(alpha), None, 0, 0, None, None, None, 0,
                      _pointer(tile.base), TYPES[tile.base.dtype] if tile.base is not None else 0,
                      None, None, out.ctypes.data)
        if tile.deltas is not None:
            args.deltas, args.delta_type, args.delta_stride = _pointer(tile.deltas), TYPES[tile.deltas.dtype], tile.size
        if plan.int8_scale is not None:
            keep.append(np.ascontiguousarray(plan.int8_scale[tile.first * plan.block:tile.stop * plan.block]))
            args.delta_scale = keep[-1].ctypes.data
        if fold is not None:
            keep.append(np.ascontiguousarray(fold[tile.first * plan.block:tile.stop * plan.block], np.float32))
            args.fold = keep[-1].ctypes.data
        if tile.u is not None:
            left = np.ascontiguousarray(plan.left_factor(tile.u, alpha), np.float32)   # [O_t, k]
            keep.append(left)
            if plan.block == 1:
                # The plain layout is the product's own order: one GEMM straight into the buffer.
                args.product = np.dot(left, plan.v, out=out.reshape(len(left), -1)).ctypes.data
            else:
                # Blocked: computed in the kernel, lane by lane (a GEMM into scratch read back in the blocked
                # order: 10.3 vs 4.2 ms per 512x4608 layer at rank 16, full width, two threads).
                args.left, args.right, args.rank = left.ctypes.data, _pointer(plan.vt), left.shape[1]
        self._run(args, blocks)

    def _run(self, args: _Layer, blocks: int) -> None:
        floats = blocks * args.rows * args.block
        parts = min(self.threads, max(1, floats // self.split_floats)) if self._pool else 1
        if parts == 1:
            self._call(args)
            return
        cuts = np.linspace(0, blocks, parts + 1).astype(int)
        pieces = []
        for first, stop in zip(cuts[:-1], cuts[1:], strict=True):
            piece = _Layer.from_buffer_copy(args)
            piece.first, piece.stop = int(first), int(stop)
            pieces.append(piece)
        for future in [self._pool.submit(self._call, p) for p in pieces]:
            future.result()

    def _call(self, args: _Layer) -> None:
        if self._fuse(ctypes.byref(args)) != 0:
            raise ValueError(f"native fusion refused a layout (block {args.block})")


def _library_path() -> str | None:
    spec = importlib.util.find_spec(LIBRARY)
    return spec.origin if spec is not None and spec.origin else None


def _check_bases(seed: int = 0) -> CompactBases:
    """Small random bases with a layer in every storage kind and dtype (no exporter needed)."""
    rng = np.random.default_rng(seed)
    shapes = parameter_shapes("small", 0.25, 12)
    kinds = [LayerStorage("full", "float32", 0), LayerStorage("dense", "float16", 0),
             LayerStorage("int8", "float32", 0), LayerStorage("int8", "float16", 0),
             LayerStorage("lowrank", "float16", 3), LayerStorage("lowrank", "float32", 2),
             LayerStorage("shared", "float32", 0), LayerStorage("dense", "float32", 0),
             LayerStorage("subspace", "float16", 3), LayerStorage("subspace", "float32", 2)]
    layers = []
    for i, layer in enumerate(mixed_layers(shapes)):
        storage = kinds[i % len(kinds)]
        parts = {}
        for part, (dtype, shape) in expected_tensors(layer, storage, 3).items():
            if dtype == np.int8:
                parts[part] = rng.integers(-127, 128, shape).astype(np.int8)
            else:
                values = rng.standard_normal(shape) * 0.1
                if part == "channels" and layer.batch_norm is not None:
                    values[:, 3] = np.abs(values[:, 3]) + 0.5   # running variance
                parts[part] = (np.abs(values) if part == "scale" else values).astype(dtype)
        layers.append(LayerBases(layer, storage, parts))
    return CompactBases(layers, shapes, 3)


def packed_placements(shapes: dict, block: int) -> tuple[dict[str, Placement], int]:
    """The folded tensors packed in order, 64-byte aligned, conv weights blocked by `block` (8 or 16)
    where they can be, in turn in each NCHWc variant (0: all plain); and the floats they span."""
    from .compiled import blocked_views
    from .folding import folded_names

    placements, cursor = {}, 0
    for name, shape in folded_names(shapes).items():
        views = [v for v in blocked_views(shape) if v[0][1] == block]
        view = views[len(placements) % len(views)] if views else None
        placements[name] = Placement(name, shape, cursor, view)
        cursor = aligned(cursor + math.prod(shape))
    return placements, cursor


def self_check(kernel: NativeKernel) -> str | None:
    """None if `kernel` writes what numpy writes (within float32 rounding) for every storage kind, in the
    plain layout and blocked by 8 and 16, as the engine uses it (its own tiling); else what differed.
    (tests/test_fusion.py also checks tiles that split layers and layers split over threads.)"""
    bases = _check_bases()
    alpha = np.random.default_rng(1).dirichlet(np.ones(3), 4).astype(np.float32)
    for block in (0, 8, 16):
        placements, floats = packed_placements(bases.shapes, block)
        expected = FusionPlan.build(bases, placements, floats, NUMPY, tile_floats=None)
        plan = FusionPlan.build(bases, placements, floats, kernel)
        want, got = expected.new_buffer(None), plan.new_buffer(None)
        expected.fuse_and_fold(alpha, want)
        plan.fuse_and_fold(alpha, got)
        error = float(np.abs(got.data - want.data).max())
        if not error <= 1e-5 * (1 + float(np.abs(want.data).max())):
            return f"block {block}: differs from numpy by {error:.3g}"
    return None


_lock = threading.Lock()
_loaded: list[NativeKernel | None] = []


def native_kernel() -> NativeKernel | None:
    """The C kernel, loaded and checked once per process; None where it is not built or not right."""
    with _lock:
        if not _loaded:
            _loaded.append(_load())
        return _loaded[0]


def _load() -> NativeKernel | None:
    if os.environ.get("TAPER_FUSION") == "numpy":
        log.debug("native fusion off: TAPER_FUSION=numpy")
        return None
    path = _library_path()
    if path is None:
        log.debug("native fusion unavailable: %s was not built (numpy fusion is used)", LIBRARY)
        return None
    try:
        kernel = NativeKernel(ctypes.CDLL(path))
    except (OSError, AttributeError) as e:
        log.debug("native fusion unavailable: %s (numpy fusion is used)", e)
        return None
    problem = self_check(kernel)
    if problem:
        log.debug("native fusion declined: %s (numpy fusion is used)", problem)
        return None
    return kernel


__all__ = ["NativeKernel", "native_kernel", "packed_placements", "self_check"]
