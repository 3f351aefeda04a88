"""Which CPU a benchmark ran on: every result file names it (model, cores, the vector and integer features
the kernels and onnxruntime choose by, the L3), since the figures move with it (docs/results/cpus.json keeps
one row per CPU, keyed by `key`).

>>> sorted(describe())
['cores', 'features', 'l3_bytes', 'machine', 'model']
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from sdk.media.report_page import cpu_name

# x86 and aarch64 features that change which kernel runs (ours: AVX2+FMA+F16C, AVX-512, NEON; onnxruntime's
# int8 kernels: VNNI, AMX; its NCHWc block: AVX-512).
FEATURES = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx_vnni",
            "avx512_bf16", "avx512_fp16", "amx_int8", "asimd", "fphp", "asimdhp", "asimddp", "sve")


def features() -> list[str]:
    """The CPU's flags among FEATURES (Linux: /proc/cpuinfo `flags` on x86, `Features` on ARM)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith(("flags", "Features")):
                have = set(line.split(":", 1)[1].split())
                return [f for f in FEATURES if f in have]
    except OSError:
        pass
    return []


def l3_bytes() -> int | None:
    """The last-level (L3) cache CPU 0 sees (Linux sysfs), or None."""
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            if (index / "level").read_text().strip() != "3":
                continue
            size = (index / "size").read_text().strip()
            return int(size[:-1]) * {"K": 1 << 10, "M": 1 << 20}[size[-1]] if size[-1] in "KM" else int(size)
        except (OSError, ValueError, KeyError):
            continue
    return None


def describe() -> dict:
    """This CPU, as a result file records it."""
    return {"model": cpu_name().rsplit(",", 1)[0], "cores": os.cpu_count(), "machine": platform.machine(),
            "features": features(), "l3_bytes": l3_bytes()}


def key() -> str:
    """What tells two CPUs apart in a per-CPU table: the model name and the features."""
    return f"{cpu_name().rsplit(',', 1)[0]} [{' '.join(features())}]"
