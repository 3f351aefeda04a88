"""The test suite's size and time on this machine: docs/results/suite.json (`tests`, `pytest_s`, `cpu`,
`command`, `file_seconds`: each test file's time, setup and teardown included, which tests/conftest.py reads to
hand the slowest files out first, and `machine`: the CPU time the run took, the time the hypervisor stole, and a
fixed Python loop timed before and after, since the same suite took 355-466 s here on 2026-11-29).
Runs pytest as `make test` does (after set-up), on a quiet machine.

    python -m scripts.suite_timing
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from scripts import cpu
from scripts.results import write_result


def steal_seconds() -> float:
    """CPU time the hypervisor gave other guests, all cores (/proc/stat's 8th field; 0 where unreadable)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def python_loop_seconds() -> float:
    """A fixed pure-Python loop, timed: how fast this machine is right now (2026-11-29 here: 0.92-3.04 s)."""
    start = time.perf_counter()
    total = 0
    for i in range(20_000_000):
        total += i
    return round(time.perf_counter() - start, 2)


SUMMARY = re.compile(r"(\d+) passed(?:, (\d+) skipped)?.* in ([\d.]+)s")


def file_seconds(junit_xml: Path) -> dict[str, float]:
    """Seconds per test file (tests/x.py), slowest first, from pytest's JUnit XML (our own run's file)."""
    totals: dict[str, float] = defaultdict(float)
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        path = "/".join(module[: next((i + 1 for i, m in enumerate(module) if m.startswith("test_")), len(module))])
        totals[path + ".py"] += float(case.get("time", 0))
    return {k: round(v, 1) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/results/suite.json"))
    args = parser.parse_args(argv)
    loop_before, steal_before = python_loop_seconds(), steal_seconds()
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "suite.xml"
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"],
                              capture_output=True, text=True)
        wall = time.perf_counter() - start
        files = file_seconds(junit) if junit.exists() else {}
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    machine = {"cpu_s": round(children.ru_utime + children.ru_stime, 1),   # pytest and everything it started
               "steal_s": round(steal_seconds() - steal_before, 1),
               "python_loop_s": [loop_before, python_loop_seconds()]}
    last = done.stdout.strip().splitlines()[-1]
    found = SUMMARY.search(last)
    if done.returncode != 0 or found is None:
        print(done.stdout[-3000:], done.stderr[-2000:])
        raise SystemExit(f"the suite did not pass: {last}")
    result = {"tests": int(found.group(1)), "skipped": int(found.group(2) or 0),
              "pytest_s": float(found.group(3)), "wall_s": round(wall, 1), "summary": last,
              "cpu": cpu.describe(), "machine": machine,
              "command": "python -m scripts.suite_timing (pytest -q, as make test runs it)",
              "file_seconds": files}
    write_result(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
