"""The machine's roofline for fuse+fold, measured in the benchmark's own run, and a fusion plan's work.

A fuse+fold cannot beat (bytes read + bytes written) / copy bandwidth + multiply-adds / FMA rate, where
- copy bandwidth is a large copy's (read + write bytes over its time: 128 MB, four times the L3 cache of
  this machine kind), the better of one and two threads;
- the FMA rate is a large sgemm's (2048 x 2048 x 2048 float32, torch's BLAS: multiply-adds per second,
  one multiply-add counted once), on one thread and on two;
- a plan's work counts what one `FusionPlan.fuse_and_fold` must read (W_0, the deltas or factors, the
  channel tensors and int8 scales of the layers it fuses; shared convolutions are written once per buffer
  and not read again) and write (their folded weights and biases), and its arithmetic: per element Q
  multiply-adds for stored deltas or k for low rank (r for `subspace`, Q r for `lowrank`), one each for
  the int8 scale, W_0 and the fold; per output channel the left factor (Q r) and the channel mix (Q c).
  Each add or multiply counts as one multiply-add, which makes the roofline a little slower than the work
  strictly needs (and the kernel's ratio to it a little better than the truth).
The roofline uses the FMA rate at the thread count the fusion kernel uses for the plan (the C kernel: two
on this machine kind, one for a plan that moves under 8 MB).

>>> work = Work(bytes_read=2_000_000, bytes_written=3_000_000, multiply_adds=7_000_000)
>>> Roofline(copy_gb_s=25.0, fma_gflops_1t=35.0, fma_gflops_2t=70.0).ms(work, threads=2)
0.3
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import asdict, dataclass

import numpy as np

from sdk.fusion.bases import RANKED_KINDS

COPY_BYTES = 128 << 20
GEMM_SIZE = 2048


@dataclass(frozen=True)
class Work:
    bytes_read: int
    bytes_written: int
    multiply_adds: int

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Roofline:
    copy_gb_s: float
    fma_gflops_1t: float
    fma_gflops_2t: float

    def ms(self, work: Work, threads: int) -> float:
        """The least time `work` can take on this machine, in ms."""
        fma = self.fma_gflops_1t if threads <= 1 else self.fma_gflops_2t
        return round((work.bytes_read + work.bytes_written) / self.copy_gb_s / 1e6
                     + work.multiply_adds / fma / 1e6, 4)

    def as_dict(self) -> dict:
        return {k: round(v, 2) for k, v in asdict(self).items()}


def median_s(fn, repeats: int) -> float:
    """Seconds per call of `fn`, the median of `repeats` after one untimed call."""
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def copy_bandwidth(repeats: int = 9) -> float:
    """GB/s of a large copy (read + write bytes), the better of one and two threads."""
    source = np.random.default_rng(0).random(COPY_BYTES // 4, dtype=np.float32)
    target = np.empty_like(source)
    half = source.size // 2

    def two_threads():
        other = threading.Thread(target=np.copyto, args=(target[:half], source[:half]))
        other.start()
        np.copyto(target[half:], source[half:])
        other.join()

    best = min(median_s(lambda: np.copyto(target, source), repeats), median_s(two_threads, repeats))
    return 2 * source.nbytes / best / 1e9


def fma_rate(threads: int, repeats: int = 5) -> float:
    """Billions of multiply-adds per second of a large float32 sgemm on `threads` threads."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.rand(GEMM_SIZE, GEMM_SIZE), torch.rand(GEMM_SIZE, GEMM_SIZE)
        out = torch.empty(GEMM_SIZE, GEMM_SIZE)
        return GEMM_SIZE ** 3 / median_s(lambda: torch.mm(a, b, out=out), repeats) / 1e9
    finally:
        torch.set_num_threads(before)


def measure() -> Roofline:
    """This machine's roofline, now (a few seconds)."""
    roofline = Roofline(copy_bandwidth(), fma_rate(1), fma_rate(2))
    time.sleep(1.0)   # let BLAS's worker threads stop spinning before anything else is timed
    return roofline


def plan_work(plan, convs_only: bool = False) -> Work:
    """What one `plan.fuse_and_fold` reads, writes and computes (see the module's doc); `convs_only`: without
    the classifier (the Java core mixes only the task's rows of it)."""
    read = written = madds = 0
    q = plan.num_bases
    for layer in plan.layers:
        if convs_only and layer.bias is None:
            continue
        lb, n = layer.bases, layer.weight.size
        channels = lb.parts["channels"]
        outputs = layer.layer.rows
        read += channels.nbytes + sum(a.nbytes for a in (layer.v, layer.vt, layer.int8_scale) if a is not None)
        read += sum(a.nbytes for t in layer.tiles for a in (t.base, t.deltas, t.u) if a is not None)
        written += 4 * (n + outputs)
        madds += channels.shape[0] * channels.shape[1] * outputs
        if any(t.deltas is not None for t in layer.tiles):
            madds += q * n + (n if layer.int8_scale is not None else 0)
        if lb.kind in RANKED_KINDS:
            k = lb.storage.rank * (1 if lb.kind == "subspace" else q)
            madds += k * n + q * outputs * lb.storage.rank
        if any(t.base is not None for t in layer.tiles):
            madds += n
        if layer.bias is not None:
            madds += n   # the fold
    return Work(read, written, madds)


def over_roofline(ms: float, work: Work, roofline: Roofline, threads: int) -> float:
    return round(ms / roofline.ms(work, threads), 3)
