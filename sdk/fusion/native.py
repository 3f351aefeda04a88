"""The fusion kernel in C (`sdk/fusion/_fusion_kernel.c`, built with the package when a compiler is there), behind
the same `FusionKernel` protocol as `sdk.fusion.plan.NumpyKernel`.

numpy fuses a compact layer in five passes (widen, GEMV, int8 scale, + W_0, fold) and mixes each layer's
batch norm in numpy; the C kernel does the whole network in one call per thread: per output-channel block
it mixes the channel tensors, writes the folded bias, mixes the low-rank left factor, then writes the
block's weights in one pass with the values in registers (deltas of any dtype, int8 scale, the low-rank
product, + W_0, fold). The threads (ctypes releases the GIL) take each a share of every layer's blocks, so
they never write the same memory and personalize() pays one hand-off, not one per layer. On x86 the library
holds AVX2+FMA+F16C and AVX-512 builds beside the baseline one and uses the best the CPU has (`variant`).

Why: the kernel this replaced (one ctypes call per layer, chunked passes over an L1 buffer, lane
patterns rebuilt with an integer modulo per element, float16 widened by 22 integer instructions per 8
values) ran fuse+fold at 4-7x its roofline; ad-hoc before/after on this machine, one process each, median
of 40: full-width subspace:8+fp16 16.1 -> 3.6 ms, drop:0.04+subspace:8+fp16 10.5 -> 2.5 ms, fp32 29.0 ->
10.9 ms, bench size subspace:8+fp16 1.94 -> 0.32 ms. The benchmark with the roofline is
docs/results/runtime.md (fp32) and docs/results/bundle.md (every mode).

`native_kernel()` loads the library once per process and checks it against numpy on every storage kind
in the plain and both blocked layouts before anything uses it (~0.1 s, at the first `sdk.load`); if the
library is missing or the check fails, it says why at debug level (logger `sdk.fusion.native`) and
returns None (numpy is used). `TAPER_FUSION=numpy` in the environment turns it off (for A/B timing).

>>> kernel = native_kernel()
>>> kernel is None or kernel.name == "native"
True
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import logging
import math
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from sdk.fusion.architecture import BN_EPS, mixed_layers, parameter_shapes
from sdk.fusion.bases import CompactBases, LayerBases, LayerStorage, expected_tensors
from sdk.fusion.plan import NUMPY, FusionPlan, LayerPlan, Placement, WeightBuffer, aligned, blocked_views

log = logging.getLogger(__name__)

LIBRARY = "sdk.fusion._fusion_kernel"
TYPES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.int8): 2}
# A network is split over threads only from this many bytes moved (read + written) per thread: below, the
# hand-off to a sleeping pool thread (~70 us here) costs what it saves. Ad hoc, caches evicted and the pool
# idle before each call, bench size, median of 60: drop:0.04+subspace:8+fp16 (3.6 MB) 0.39 ms on one
# thread, 0.51 on two; subspace:8+fp16 (5.0 MB) 0.55 and 0.66. A chosen bound, not a measured optimum.
MIN_BYTES_PER_THREAD = 4 << 20


class _Layer(ctypes.Structure):
    """Mirrors `taper_layer` in _fusion_kernel.c, field for field."""
    _fields_ = [("out", ctypes.c_int64), ("bias", ctypes.c_int64), ("blocks", ctypes.c_int64),
                ("rows", ctypes.c_int64), ("block", ctypes.c_int64), ("alpha_row", ctypes.c_int64),
                ("channels", ctypes.c_void_p), ("channel_rows", ctypes.c_int64), ("channel_count", ctypes.c_int64),
                ("deltas", ctypes.c_void_p), ("delta_type", ctypes.c_int64), ("delta_scale", ctypes.c_void_p),
                ("base", ctypes.c_void_p), ("base_type", ctypes.c_int64), ("u", ctypes.c_void_p),
                ("u_type", ctypes.c_int64), ("right", ctypes.c_void_p), ("rank", ctypes.c_int64),
                ("subspace", ctypes.c_int64), ("quantized", ctypes.c_void_p), ("quantized_scale", ctypes.c_void_p),
                ("qmin", ctypes.c_int64), ("qmax", ctypes.c_int64)]


@functools.cache
def layer_array(count: int) -> type:
    """The ctypes type of `count` layers, made once: a ctypes type made per plan would be garbage with
    reference cycles when the plan is dropped (tests/test_lifetime.py)."""
    return _Layer * count


def _joined(parts: list[np.ndarray | None], axis: int) -> np.ndarray | None:
    """A layer's arrays from its tiles (one tile: as is; several: side by side along `axis`)."""
    if parts[0] is None:
        return None
    return parts[0] if len(parts) == 1 else np.ascontiguousarray(np.concatenate(parts, axis=axis))


@dataclass
class NativePlan:
    """A fusion plan as the C kernel reads it: one `taper_layer` per fused layer (pointers into `keep`,
    which holds the arrays alive), and the scratch floats one thread needs (a block's left factor)."""
    layers: ctypes.Array
    keep: list[np.ndarray]
    scratch_floats: int
    bytes_moved: int                    # what one call reads and writes


# The library's builds, as `taper_kernel_variant` numbers them: the baseline ISA (every CPU, aarch64 too),
# AVX2+FMA+F16C and AVX-512 (x86, chosen by what the CPU has).
BUILDS = ("baseline", "avx2", "avx512")


def available_builds(library: ctypes.CDLL) -> tuple[str, ...]:
    """The builds this CPU can run, the one the engine uses last."""
    library.taper_kernel_variant.restype = ctypes.c_int64
    return BUILDS[:library.taper_kernel_variant() + 1]


class NativeKernel:
    """The whole network in one C call per thread, each thread a share of every layer's output-channel
    blocks, in the library's best build for this CPU, or in `build` (one of `available_builds`: for tests,
    and to time on one CPU the build another CPU would run)."""
    name = "native"
    tile_floats: int | None = None

    def __init__(self, library: ctypes.CDLL, threads: int | None = None,
                 split_bytes: int = MIN_BYTES_PER_THREAD, build: str | None = None):
        self._library = library
        builds = available_builds(library)
        if build is not None and build not in builds:
            raise ValueError(f"this CPU cannot run the {build!r} build of the fusion kernel (it has {builds})")
        self.variant = build or builds[-1]
        number = BUILDS.index(self.variant)
        fuse = library.taper_fuse_network_build
        fuse.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                         ctypes.c_float, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
        fuse.restype = ctypes.c_int64
        self._fuse = functools.partial(fuse, number)
        self.threads = max(1, threads or os.cpu_count() or 1)
        self.split_bytes = split_bytes
        self._pool = ThreadPoolExecutor(self.threads - 1, "taper-fusion") if self.threads > 1 else None
        # sdk.engines.int8's weight quantizer, in the same build.
        quantize = library.taper_quantize_rows_build
        quantize.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                             ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
        quantize.restype = ctypes.c_int64
        self._quantize = functools.partial(quantize, number)

    def quantize_rows(self, weight: np.ndarray, qmin: int, qmax: int, q: np.ndarray, scale: np.ndarray) -> bool:
        """`sdk.engines.int8.quantize_weight` of the C-contiguous float32 `weight` [O, ...] into int8 `q` and float32
        `scale` [O], bit for bit, the rows split over the threads; False (nothing written) where the library
        has no quantizer."""
        return self.quantize_layers([(weight, q, scale)], qmin, qmax)

    def quantize_layers(self, layers: list[tuple[np.ndarray, np.ndarray, np.ndarray]], qmin: int, qmax: int) -> bool:
        """`quantize_rows` of every (weight, q, scale) at once: each layer's rows split in one part per thread
        and every thread given one part of each (most of a ResNet-18's layers are too small to split alone,
        which left a whole network's quantizing on one core: 9.2 ms at full width here); False (nothing
        written) where the library has no quantizer."""
        if self._quantize is None:
            return False
        work: list[list[tuple]] = [[] for _ in range(self.threads if self._pool else 1)]
        for weight, q, scale in layers:
            if not (weight.dtype == np.float32 and q.dtype == np.int8 and scale.dtype == np.float32
                    and weight.flags.c_contiguous and q.flags.c_contiguous and scale.flags.c_contiguous
                    and q.size == weight.size and scale.size == len(weight)):
                raise ValueError("quantize_rows takes C-contiguous float32 weights, int8 and float32 outputs of "
                                 "their size")
            rows, cols = len(weight), weight.size // max(1, len(weight))
            parts = min(len(work), rows)
            bounds = [rows * p // parts for p in range(parts + 1)]
            for p in range(parts):
                work[p].append((weight.ctypes.data, cols, bounds[p], bounds[p + 1], qmin, qmax, q.ctypes.data,
                                scale.ctypes.data))

        def run(calls: list[tuple]) -> None:
            for args in calls:
                self._quantize(*args)

        futures = [self._pool.submit(run, calls) for calls in work[1:] if calls]
        run(work[0])
        for future in futures:
            future.result()
        return True

    def scratch_floats(self, layers: list[LayerPlan]) -> int:
        return 0    # each call's scratch is its own (`NativePlan.scratch_floats`)

    def prepare(self, plan: FusionPlan) -> NativePlan:
        """The plan's layers as `taper_layer` structs (built once per plan)."""
        keep: list[np.ndarray] = []

        def held(array: np.ndarray | None, dtype=None) -> int | None:
            if array is None:
                return None
            keep.append(np.ascontiguousarray(array, dtype))
            return keep[-1].ctypes.data

        layers, scratch, moved = [], 1, 0
        for lp in plan.layers:
            deltas = _joined([t.deltas for t in lp.tiles], 1)
            base = _joined([t.base for t in lp.tiles], 0)
            u = _joined([t.u for t in lp.tiles], 1)
            channels = lp.bases.parts["channels"]
            bias = lp.bias.start if lp.bias is not None else plan.head[1].start
            args = _Layer(lp.weight.start, bias, lp.blocks, lp.slab // lp.block, lp.block, lp.layer.block,
                          held(channels, np.float32), channels.shape[0], channels.shape[1],
                          held(deltas), TYPES[deltas.dtype] if deltas is not None else 0,
                          held(lp.int8_scale, np.float32), held(base), TYPES[base.dtype] if base is not None else 0)
            if u is not None:
                k = lp.bases.storage.rank * (1 if lp.bases.kind == "subspace" else plan.num_bases)
                args.u, args.u_type = held(u), TYPES[u.dtype]
                args.right = held(lp.vt if lp.block > 1 else lp.v, np.float32)
                args.rank, args.subspace = lp.bases.storage.rank, int(lp.bases.kind == "subspace")
                scratch = max(scratch, k * lp.block)
            layers.append(args)
            moved += 4 * (lp.weight.size + lp.blocks * lp.block)
        moved += sum(a.nbytes for a in keep)
        return NativePlan(layer_array(len(layers))(*layers), keep, scratch, moved)

    def quantizing(self, plan: FusionPlan, outputs: dict[str, tuple[np.ndarray, np.ndarray]], qmin: int, qmax: int
                   ) -> tuple[NativePlan, set[str]] | None:
        """The plan's prepared layers that also write int8 weights: each plain-layout layer whose weight is
        named in `outputs` (name -> (int8 [O, ...], float32 scales [O]), held by the caller) quantizes every
        channel as soon as it is fused (`quantize_rows`, in cache), for `fuse_and_fold(..., prepared=)`; and
        the names it quantizes. Their float weights are not written to the buffer (each channel is fused in
        the thread's scratch). None where the library has no quantizer."""
        if self._quantize is None:
            return None
        native = plan.prepared
        layers = [_Layer.from_buffer_copy(layer) for layer in native.layers]
        done = set()
        for layer, lp in zip(layers, plan.layers, strict=True):
            if lp.weight.name in outputs and lp.block == 1:
                q, scale = outputs[lp.weight.name]
                if not (q.dtype == np.int8 and scale.dtype == np.float32 and q.flags.c_contiguous
                        and scale.flags.c_contiguous and q.size == lp.weight.size and scale.size == lp.weight.shape[0]):
                    raise ValueError(f"{lp.weight.name}: int8 outputs of another shape or type")
                layer.quantized, layer.quantized_scale = q.ctypes.data, scale.ctypes.data
                layer.qmin, layer.qmax = qmin, qmax
                done.add(lp.weight.name)
        rows = max((lp.slab for lp in plan.layers if lp.weight.name in done), default=0)   # block 1: slab = rows
        return NativePlan(layer_array(len(layers))(*layers), native.keep, native.scratch_floats + rows,
                          native.bytes_moved + sum(outputs[n][0].nbytes for n in done)), done

    def fuse_and_fold(self, plan: FusionPlan, alpha: np.ndarray, target: WeightBuffer,
                      prepared: NativePlan | None = None) -> None:
        """target <- the plan's layers fused with alpha; `prepared` (from `quantizing`) also writes int8 weights."""
        native = prepared or plan.prepared
        alpha = np.ascontiguousarray(alpha, np.float32)
        parts = self.parts(plan)
        scratch = np.empty((parts, native.scratch_floats), np.float32)
        calls = [self._pool.submit(self._call, native.layers, alpha, target.data, p, parts, scratch[p])
                 for p in range(1, parts)]
        self._call(native.layers, alpha, target.data, 0, parts, scratch[0])
        for call in calls:
            call.result()

    def parts(self, plan: FusionPlan) -> int:
        """The threads that fuse `plan` (one below `split_bytes` moved per thread)."""
        return min(self.threads, max(1, plan.prepared.bytes_moved // self.split_bytes)) if self._pool else 1

    def _call(self, layers: ctypes.Array, alpha: np.ndarray, buffer: np.ndarray, part: int, parts: int,
              scratch: np.ndarray) -> None:
        status = self._fuse(ctypes.addressof(layers), len(layers), alpha.ctypes.data, alpha.shape[1], BN_EPS,
                            buffer.ctypes.data, part, parts, scratch.ctypes.data)
        if status != 0:
            raise ValueError("native fusion refused a layout (a block other than 1, 8 or 16)")


def _library_path() -> str | None:
    spec = importlib.util.find_spec(LIBRARY)
    return spec.origin if spec is not None and spec.origin else None


CHECK_KINDS = (LayerStorage("full", "float32", 0), LayerStorage("dense", "float16", 0),
               LayerStorage("int8", "float32", 0), LayerStorage("int8", "float16", 0),
               LayerStorage("lowrank", "float16", 3), LayerStorage("lowrank", "float32", 2),
               LayerStorage("shared", "float32", 0), LayerStorage("dense", "float32", 0),
               LayerStorage("subspace", "float16", 3), LayerStorage("subspace", "float32", 2))


def _check_bases(seed: int = 0, kinds: tuple[LayerStorage, ...] = CHECK_KINDS, width: float = 0.25) -> CompactBases:
    """Random bases (3 of them, 12 classes, the small stem) with a layer in every storage kind and dtype of
    `kinds`, in turn (no exporter needed); scripts/cross_kernel.py also counts instructions on one kind at a time."""
    rng = np.random.default_rng(seed)
    shapes = parameter_shapes("small", width, 12)
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
    from sdk.fusion.folding import folded_names

    placements, cursor = {}, 0
    for name, shape in folded_names(shapes).items():
        views = [v for v in blocked_views(shape) if v[0][1] == block]
        view = views[len(placements) % len(views)] if views else None
        placements[name] = Placement(name, shape, cursor, view)
        cursor = aligned(cursor + math.prod(shape))
    return placements, cursor


def fusion_check_cases(kernel: NativeKernel) -> Iterator[tuple[int, FusionPlan, np.ndarray, np.ndarray]]:
    """The self-check's fusion cases: for the plain layout and blocks of 8 and 16 (0, 8, 16), `kernel`'s plan
    of the check bases (a layer in every storage kind, as the engine tiles it), alpha, and what numpy writes
    (scripts/cross_kernel.py runs the same cases on aarch64)."""
    bases = _check_bases()
    alpha = np.random.default_rng(1).dirichlet(np.ones(3), 4).astype(np.float32)
    for block in (0, 8, 16):
        placements, floats = packed_placements(bases.shapes, block)
        expected = FusionPlan.build(bases, placements, floats, NUMPY, tile_floats=None)
        want = expected.new_buffer(None)
        expected.fuse_and_fold(alpha, want)
        yield block, FusionPlan.build(bases, placements, floats, kernel), alpha, want.data


def within_float32_rounding(got: np.ndarray, want: np.ndarray) -> tuple[float, bool]:
    """The largest difference of two fusions' weights, and whether it is float32 rounding (the self-check's
    bound: 1e-5 of the largest weight, at least 1e-5)."""
    error = float(np.abs(got - want).max())
    return error, error <= 1e-5 * (1 + float(np.abs(want).max()))


def self_check(kernel: NativeKernel) -> str | None:
    """None if `kernel` writes what numpy writes (within float32 rounding) for every storage kind, in the
    plain layout and blocked by 8 and 16, as the engine uses it (its own tiling); else what differed.
    (tests/test_fusion.py also checks tiles that split layers and layers split over threads.)"""
    for block, plan, alpha, want in fusion_check_cases(kernel):
        got = plan.new_buffer(None)
        plan.fuse_and_fold(alpha, got)
        error, close = within_float32_rounding(got.data, want)
        if not close:
            return f"block {block}: differs from numpy by {error:.3g}"
    return _check_quantizer(kernel) or check_quantizing_fusion(kernel)


def check_quantizing_fusion(kernel: NativeKernel) -> str | None:
    """None if the fusion that quantizes as it fuses (`quantizing`) writes, for every storage kind, the int8
    weights and scales that `sdk.engines.int8.quantize_weight` makes of the kernel's own float fusion, bit for bit,
    and the same folded biases; or if the library has no quantizer. Else what differed."""
    from sdk.fusion.quantize import WEIGHT_QMAX, WEIGHT_QMIN, quantize_weight

    bases = _check_bases()
    alpha = np.random.default_rng(3).dirichlet(np.ones(3), 4).astype(np.float32)
    placements, floats = packed_placements(bases.shapes, 0)
    plan = FusionPlan.build(bases, placements, floats, kernel, tile_floats=None)
    mixed = [lp for lp in plan.layers if lp.bias is not None]   # the convs (the classifier stays float)
    outputs = {lp.weight.name: (np.empty(lp.weight.shape, np.int8), np.empty(lp.weight.shape[0], np.float32))
               for lp in mixed}
    quantizing = kernel.quantizing(plan, outputs, WEIGHT_QMIN, WEIGHT_QMAX)
    if quantizing is None:
        return None
    prepared, done = quantizing
    floats_only, both = plan.new_buffer(None), plan.new_buffer(None)
    plan.fuse_and_fold(alpha, floats_only)
    plan.fuse_and_fold(alpha, both, prepared)
    if done != set(outputs):
        return f"the quantizing fusion left out {sorted(set(outputs) - done)}"
    for lp in mixed:
        q, scale = outputs[lp.weight.name]
        want_q, want_scale = quantize_weight(lp.weight.view_of(floats_only.data))
        if not (np.array_equal(q, want_q) and np.array_equal(scale.view(np.uint32), want_scale.view(np.uint32))
                and np.array_equal(lp.bias.view_of(both.data), lp.bias.view_of(floats_only.data))):
            return f"the quantizing fusion differs from fusing, then quantizing, at {lp.weight.name}"
    return None


def _check_quantizer(kernel: NativeKernel) -> str | None:
    """None if the quantizer writes what `sdk.engines.int8.quantize_weight` writes, bit for bit (ties to even, a
    zero row, the largest value of each sign), or if the library has none."""
    from sdk.fusion.quantize import WEIGHT_QMAX, WEIGHT_QMIN, quantize_weight

    rng = np.random.default_rng(2)
    weight = (rng.standard_normal((9, 3, 3, 3)) * 0.1).astype(np.float32)
    weight[1] = 0.0
    weight[2, 0, 0] = [0.5, -0.5, 1.5]   # scale 3/127: ties after the division
    weight[3] *= 1e-30
    q, scale = np.empty(weight.shape, np.int8), np.empty(9, np.float32)
    if not kernel.quantize_rows(weight, WEIGHT_QMIN, WEIGHT_QMAX, q, scale):
        return None
    want_q, want_scale = quantize_weight(weight)
    if not (np.array_equal(q, want_q) and np.array_equal(scale.view(np.uint32), want_scale.view(np.uint32))):
        return "the int8 quantizer differs from numpy's"
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


__all__ = ["BUILDS", "NativeKernel", "NativePlan", "available_builds", "native_kernel", "packed_placements",
           "self_check"]
