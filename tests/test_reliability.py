"""A fast slice of the reliability suite (scripts/fuzz_bundle.py, 10,000 cases for the report): every kind
of damage, each case in a worker subprocess with a timeout; no escape, hang, crash or silent change."""

import json
import subprocess
import sys
from pathlib import Path


def test_a_slice_of_the_reliability_suite_finds_no_failure(tiny_bundle, tmp_path):
    out = tmp_path / "reliability"
    script = Path(__file__).parents[1] / "scripts" / "fuzz_bundle.py"
    result = subprocess.run([sys.executable, str(script), "--cases", "120", "--bundle", str(tiny_bundle),
                             "--out", str(out), "--timeout", "60", "--seed", "7"],
                            capture_output=True, text=True, timeout=600)
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["cases"] == 120 and sum(report["totals"].values()) == 120
    assert report["failures"] == 0 and result.returncode == 0, out.with_suffix(".md").read_text()
    assert all(sum(row.values()) > 0 for row in report["by_kind"].values())  # every kind was tried
