"""The fusion kernel (sdk/fusion/_fusion_kernel.c) built for aarch64 and checked there against the Python reference.

    python -m scripts.cross_kernel --out docs/results/aarch64_kernel.json

Jetson boards, Apple-silicon laptops and phones are aarch64; the kernel's x86 builds are checked at every
load (`sdk.fusion.native.self_check`), this one here. It is cross-built with Debian's gcc-aarch64-linux-gnu
(statically, with the package's -O3) together with a small driver (scripts/kernel_driver.c) and run under
qemu-user. The cases are the runtime's own: the self-check's random bases with a layer in every storage kind
and dtype, laid out plain and blocked by 8 and 16, split over two parts; the runtime prepares each plan for
its C kernel (`NativeKernel.prepare`), this module writes the prepared layers and their arrays to a case file,
and the aarch64 build fuses them. Its weights must equal numpy's within the self-check's tolerance; the
fusion that quantizes as it fuses and the quantizer must equal `sdk.engines.int8.quantize_weight` bit for bit. No
timing: qemu emulates.
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scripts.results import write_result
from sdk.engines.int8 import WEIGHT_QMAX, WEIGHT_QMIN, quantize_weight
from sdk.fusion.architecture import BN_EPS
from sdk.fusion.bases import LayerStorage
from sdk.fusion.native import (
    NativeKernel,
    NativePlan,
    _check_bases,
    _Layer,
    fusion_check_cases,
    native_kernel,
    packed_placements,
    within_float32_rounding,
)
from sdk.fusion.plan import FusionPlan

ROOT = Path(__file__).parents[1]
DRIVER = ROOT / "scripts" / "kernel_driver.c"
COUNTER = ROOT / "scripts" / "qemu_insn_count.c"
# The storage kinds whose fusion instructions are counted, one kind for every layer (the bundle modes'
# building blocks: fp32 bases, fp16 and int8 deltas, the compact modes' fp16 subspace of rank 8).
COUNTED_KINDS = {"dense float32": LayerStorage("dense", "float32", 0),
                 "dense float16": LayerStorage("dense", "float16", 0),
                 "int8 deltas": LayerStorage("int8", "float32", 0),
                 "subspace:8 float16": LayerStorage("subspace", "float16", 8)}
TARGETS = {"aarch64": ("aarch64-linux-gnu-gcc", "qemu-aarch64")}
POINTERS = {"channels", "deltas", "delta_scale", "base", "u", "right", "quantized", "quantized_scale"}
PARTS = 2


def tools(target: str = "aarch64") -> tuple[str, str] | None:
    """The cross compiler and emulator for `target`, or None where either is missing."""
    compiler, emulator = TARGETS[target]
    return (compiler, emulator) if shutil.which(compiler) and shutil.which(emulator) else None


def build(out_dir: Path, target: str = "aarch64") -> Path:
    """The driver with the kernel, for `target`: a static executable (qemu-user then needs no sysroot)."""
    compiler, _ = TARGETS[target]
    binary = out_dir / f"kernel_driver_{target}"
    subprocess.run([compiler, "-O3", "-static", "-Wall", "-Wextra", "-Werror", "-o", str(binary), str(DRIVER), "-lm"],
                   check=True, capture_output=True, text=True)
    return binary


class CaseFile:
    """Arrays and int64 fields in the driver's case format (scripts/kernel_driver.c)."""

    def __init__(self, job: int):
        self.job, self.arrays, self.fields = job, [], []
        self._by_address: dict[int, int] = {}

    def array(self, values: np.ndarray, output: bool = False) -> int:
        index = len(self.arrays)
        self.arrays.append((np.ascontiguousarray(values), output))
        self._by_address[values.ctypes.data] = index
        return index

    def pointer(self, address: int | None) -> int:
        """The index of the array at `address` (a pointer in a prepared layer), -1 for NULL."""
        return -1 if not address else self._by_address[address]

    def bytes(self) -> bytes:
        out = [b"TPRKCASE", struct.pack("<3q", 1, self.job, len(self.arrays))]
        for values, output in self.arrays:
            raw = values.tobytes()
            out += [struct.pack("<2q", len(raw), int(output)), raw, b"\0" * (-len(raw) % 8)]
        out += [v if isinstance(v, bytes) else struct.pack("<q", v) for v in self.fields]
        return b"".join(out)


def fuse_case(native: NativePlan, alpha: np.ndarray, buffer: np.ndarray,
              outputs: list[np.ndarray], parts: int = PARTS) -> CaseFile:
    """A fusion job: the prepared layers, their arrays, alpha and the buffer (fused into as the runtime
    made it); `outputs` (the int8 weights and scales a quantizing plan writes) come back after the buffer."""
    case = CaseFile(0)
    for values in native.keep:
        case.array(values)
    alpha = np.ascontiguousarray(alpha, np.float32)
    alpha_index, buffer_index = case.array(alpha), case.array(buffer, output=True)
    for values in outputs:
        case.array(values, output=True)
    case.fields += [len(native.layers), alpha.shape[1], struct.pack("<d", BN_EPS), buffer_index,
                    native.scratch_floats, parts, alpha_index]
    for layer in native.layers:
        for name, _ in _Layer._fields_:
            value = getattr(layer, name)
            case.fields.append(case.pointer(value) if name in POINTERS else int(value))
    return case


def run(binary: Path, case: CaseFile, sizes: list[tuple[np.dtype, int]], work: Path, target: str) -> list[np.ndarray]:
    """The driver's outputs (each of `sizes`: dtype, count) for `case`, run under the target's emulator."""
    (work / "case").write_bytes(case.bytes())
    _, emulator = TARGETS[target]
    done = subprocess.run([emulator, str(binary), str(work / "case"), str(work / "out")], capture_output=True,
                          text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"the {target} driver failed: {done.stderr.strip()}")
    raw, out, at = (work / "out").read_bytes(), [], 0
    for dtype, count in sizes:
        n = np.dtype(dtype).itemsize * count
        out.append(np.frombuffer(raw[at:at + n], dtype).copy())
        at += n
    return out


@dataclass
class Parity:
    name: str
    max_abs_diff: float
    passed: bool


def fusion_cases(kernel: NativeKernel, binary: Path, work: Path, target: str) -> list[Parity]:
    """The self-check's fusion cases (every storage kind plain and blocked by 8 and 16) against numpy, with
    its tolerance."""
    results = []
    for block, plan, alpha, want in fusion_check_cases(kernel):
        start = plan.new_buffer(None).data
        (got,) = run(binary, fuse_case(plan.prepared, alpha, start, []), [(np.float32, start.size)], work, target)
        error, close = within_float32_rounding(got, want)
        results.append(Parity(f"fuse, {'plain' if block == 0 else f'blocked by {block}'}", error, close))
    return results


def quantizing_case(kernel: NativeKernel, binary: Path, work: Path, target: str) -> Parity:
    """The fusion that quantizes as it fuses: its int8 weights and scales are `quantize_weight` of the same
    build's float fusion, bit for bit, and its folded biases the same (check_quantizing_fusion, on aarch64)."""
    bases = _check_bases()
    alpha = np.random.default_rng(3).dirichlet(np.ones(3), 4).astype(np.float32)
    placements, floats = packed_placements(bases.shapes, 0)
    plan = FusionPlan.build(bases, placements, floats, kernel, tile_floats=None)
    mixed = [lp for lp in plan.layers if lp.bias is not None]
    outputs = {lp.weight.name: (np.zeros(lp.weight.shape, np.int8), np.zeros(lp.weight.shape[0], np.float32))
               for lp in mixed}
    prepared, done = kernel.quantizing(plan, outputs, WEIGHT_QMIN, WEIGHT_QMAX)
    size = plan.new_buffer(None).data.size
    (floats_only,) = run(binary, fuse_case(plan.prepared, alpha, plan.new_buffer(None).data, []),
                         [(np.float32, size)], work, target)
    arrays = [a for name in sorted(done) for a in outputs[name]]
    got = run(binary, fuse_case(prepared, alpha, plan.new_buffer(None).data, arrays),
              [(np.float32, size)] + [(a.dtype, a.size) for a in arrays], work, target)
    both, quantized = got[0], dict(zip(sorted(done), zip(got[1::2], got[2::2], strict=True), strict=True))
    worst, same = 0.0, done == set(outputs)
    for lp in mixed:
        q, scale = quantized[lp.weight.name]
        want_q, want_scale = quantize_weight(lp.weight.view_of(floats_only))
        worst = max(worst, float(np.abs(q.astype(int) - want_q.reshape(-1)).max()))
        same &= (np.array_equal(q, want_q.reshape(-1)) and np.array_equal(scale.view(np.uint32),
                                                                         want_scale.view(np.uint32))
                 and np.array_equal(lp.bias.view_of(both), lp.bias.view_of(floats_only)))
    return Parity("quantizing fusion (int8 steps)", worst, bool(same))


def quantizer_case(binary: Path, work: Path, target: str) -> Parity:
    """The quantizer on the self-check's edge cases (ties to even, a zero row, tiny values) vs numpy."""
    rng = np.random.default_rng(2)
    weight = (rng.standard_normal((9, 3, 3, 3)) * 0.1).astype(np.float32)
    weight[1] = 0.0
    weight[2, 0, 0] = [0.5, -0.5, 1.5]
    weight[3] *= 1e-30
    q, scale = np.zeros(weight.size, np.int8), np.zeros(9, np.float32)
    case = CaseFile(1)
    w_index, q_index, s_index = case.array(weight.reshape(-1)), case.array(q, True), case.array(scale, True)
    case.fields += [w_index, weight.size // 9, 0, 9, WEIGHT_QMIN, WEIGHT_QMAX, q_index, s_index]
    got_q, got_scale = run(binary, case, [(np.int8, q.size), (np.float32, 9)], work, target)
    want_q, want_scale = quantize_weight(weight)
    same = np.array_equal(got_q, want_q.reshape(-1)) and np.array_equal(got_scale.view(np.uint32),
                                                                         want_scale.view(np.uint32))
    return Parity("quantizer (int8 steps)", float(np.abs(got_q.astype(int) - want_q.reshape(-1)).max()), bool(same))


def counter(out_dir: Path) -> Path:
    """The instruction-counting qemu plugin, built for the host."""
    library = out_dir / "libinsn.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(library), str(COUNTER)], check=True,
                   capture_output=True, text=True)
    return library


def instructions(binary: Path, plugin: Path, case: CaseFile, work: Path, target: str) -> int:
    """The guest instructions one run of `case`'s job takes: the count at 2 repeats less the count at 1
    (reading the case and writing the outputs cancel)."""
    (work / "case").write_bytes(case.bytes())
    _, emulator = TARGETS[target]
    counts = []
    for repeats in (1, 2):
        done = subprocess.run([emulator, "-plugin", str(plugin), str(binary), str(work / "case"), str(work / "out"),
                               str(repeats)], capture_output=True, text=True, timeout=600, check=True)
        counts.append(int(done.stderr.split("instructions")[-1].split()[0]))
    return counts[1] - counts[0]


def instruction_counts(kernel: NativeKernel, binary: Path, plugin: Path, work: Path, target: str,
                       width: float = 0.5) -> dict[str, dict]:
    """Per storage kind (every layer of that kind, width `width`, the plain layout the runtime fuses on ARM,
    one part): the kernel's instructions per fused weight."""
    alpha = np.random.default_rng(1).dirichlet(np.ones(3), 4).astype(np.float32)
    out = {}
    for name, storage in COUNTED_KINDS.items():
        bases = _check_bases(kinds=(storage,), width=width)
        placements, floats = packed_placements(bases.shapes, 0)
        plan = FusionPlan.build(bases, placements, floats, kernel)
        case = fuse_case(plan.prepared, alpha, plan.new_buffer(None).data, [], parts=1)
        weights = sum(lp.weight.size for lp in plan.layers)
        count = instructions(binary, plugin, case, work, target)
        out[name] = {"weights": weights, "instructions": count, "per_weight": round(count / weights, 3)}
    return out


def parity(target: str = "aarch64", count: bool = False) -> dict:
    """Builds the kernel for `target`, runs every case under emulation: {built, parity_cases, max_abs_diff,
    passed, cases}, and with `count` the instructions per fused weight of each storage kind. Needs the
    host's C kernel (the runtime prepares the plans for it)."""
    kernel = native_kernel()
    if kernel is None:
        raise RuntimeError("the host's C kernel is not built: `make setup` builds it")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        binary = build(work, target)
        cases = fusion_cases(kernel, binary, work, target) + [quantizing_case(kernel, binary, work, target),
                                                              quantizer_case(binary, work, target)]
        counts = instruction_counts(kernel, binary, counter(work), work, target) if count else None
    result = {"built": True, "parity_cases": len(cases),
              "max_abs_diff": max(c.max_abs_diff for c in cases if c.name.startswith("fuse")),
              "passed": all(c.passed for c in cases),
              "cases": [{"name": c.name, "max_abs_diff": c.max_abs_diff, "passed": c.passed} for c in cases]}
    if counts:
        result["instructions"] = counts
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="aarch64", choices=sorted(TARGETS))
    parser.add_argument("--count", action="store_true", help="also count the kernel's instructions per weight")
    parser.add_argument("--out", type=Path, help="write the result here as JSON")
    args = parser.parse_args(argv)
    if tools(args.target) is None:
        parser.error(f"needs {' and '.join(TARGETS[args.target])} (Debian: gcc-aarch64-linux-gnu, "
                     "libc6-dev-arm64-cross, qemu-user)")
    start = time.perf_counter()
    result = parity(args.target, args.count)
    result["command"] = f"python -m scripts.cross_kernel --target {args.target}" + (" --count" if args.count else "")
    result["wall_s"] = round(time.perf_counter() - start, 1)
    if args.out:
        write_result(result, args.out)
    else:
        print(json.dumps(result, indent=1))
    return 0 if result["passed"] else 1


__all__ = ["parity", "tools"]

if __name__ == "__main__":
    raise SystemExit(main())
