"""What vetting an ExecuTorch companion (sdk/engines/companion_check.py) costs `sdk.load(..., engine="executorch")`:
loads with the probe process run, with its verdict already known (the same process or the device cache),
and with the check off, alternated in one process, medians. Writes <out>.json and <out>.md.

    python -m scripts.bench_companion_check --bundle tiny.taper --companion tiny.taper.xnnpack --pairs 10

The check is switched off here only, by replacing `sdk.engines.companion_check.check_companion` for the "off" loads:
a product load has no such switch (a companion is probed unless a trusted key signed it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path


def timed_load(bundle: Path, companion: Path) -> float:
    import sdk

    start = time.perf_counter()
    sdk.load(bundle, engine="executorch", program=companion, cache=False)
    return (time.perf_counter() - start) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--companion", type=Path, required=True)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("docs/results/companion_check"))
    args = parser.parse_args(argv)
    os.environ["TAPER_DEVICE_CACHE"] = "0"   # verdicts in this process only: the probe runs when asked
    from sdk.engines import companion_check

    real = companion_check.check_companion
    timed_load(args.bundle, args.companion)   # imports executorch and torch once, outside the timings
    rows: dict[str, list[float]] = {"off": [], "probe": [], "cached": []}
    for _ in range(args.pairs):
        companion_check.check_companion = lambda *a, **k: None
        try:
            rows["off"].append(timed_load(args.bundle, args.companion))
        finally:
            companion_check.check_companion = real
        companion_check._verdicts.clear()
        rows["probe"].append(timed_load(args.bundle, args.companion))
        rows["cached"].append(timed_load(args.bundle, args.companion))
    medians = {k: round(statistics.median(v), 1) for k, v in rows.items()}
    result = {"command": "python -m scripts.bench_companion_check " + " ".join(sys.argv[1:] if argv is None else argv),
              "machine": f"{platform.machine()}, {os.cpu_count()} cores", "pairs": args.pairs,
              "load_ms_median": medians,
              "probe_overhead_ms": round(medians["probe"] - medians["off"], 1),
              "cached_overhead_ms": round(medians["cached"] - medians["off"], 1),
              "all_ms": {k: [round(x, 1) for x in v] for k, v in rows.items()}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(
        "# What vetting an ExecuTorch companion costs a load\n\n"
        f"Command: `{result['command']}` ({result['machine']}; {args.pairs} alternated rounds, medians).\n\n"
        "| load | median ms |\n|---|---|\n"
        f"| check off (bench only) | {medians['off']} |\n| probe process run (first load of a companion) | "
        f"{medians['probe']} |\n| verdict known (later loads, this process or the device cache) | "
        f"{medians['cached']} |\n\n"
        f"The probe adds {result['probe_overhead_ms']} ms to the first load of a companion on a machine (a Python "
        "process importing torch and ExecuTorch's native module, loading and running the program once); a known "
        f"verdict adds {result['cached_overhead_ms']} ms (the program's SHA-256 is computed). A companion signed "
        "by a key in "
        "`trusted_keys` is not probed.\n")
    print(json.dumps({k: result[k] for k in ("load_ms_median", "probe_overhead_ms", "cached_overhead_ms")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
