"""The front door: README.md stays short, every command in it runs as written (`--help` of each), its
links resolve, and no script trips the SDK's TelemetryWarning by importing onnxruntime first."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
WITH_SUBCOMMANDS = {"sdk", "trainer", "export", "lab"}


def readme_commands() -> list[list[str]]:
    """`python -m MODULE [SUBCOMMAND]` of every command line in the README's indented blocks."""
    found = []
    for line in README.splitlines():
        match = re.match(r"^    (?:\.venv/bin/)?python -m (\S+)(.*)", line)
        if match:
            module, rest = match.group(1), shlex.split(match.group(2).split("#")[0].rstrip(" \\"))
            sub = rest[:1] if module in WITH_SUBCOMMANDS and rest and not rest[0].startswith("-") else []
            found.append([module, *sub])
    return sorted(set(map(tuple, found)))


def test_the_readme_is_short_and_its_links_resolve():
    assert len(README.splitlines()) <= 160
    for target in re.findall(r"\]\(([^)#]+)\)", README) + re.findall(r'<img src="([^"]+)"', README):
        assert (ROOT / target).exists(), target


def test_the_results_table_is_the_results_files():
    """Every figure in the README's table is the one its results file holds (scripts/readme_results.py)."""
    from scripts import readme_results

    table = readme_results.table()
    assert readme_results.replaced(README, table) == README, "run: python -m scripts.readme_results --write"
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| what")]
    assert len(rows) == len(readme_results.ROWS) <= readme_results.MAX_ROWS


def test_a_changed_results_file_changes_the_table(tmp_path):
    import json
    import shutil

    from scripts import readme_results

    results = tmp_path / "results"
    shutil.copytree(readme_results.RESULTS, results, ignore=shutil.ignore_patterns("*.md", "*.svg"))
    bench = json.loads((results / "bench.json").read_text())
    bench["accuracy"]["taper"] = 99.99
    (results / "bench.json").write_text(json.dumps(bench))
    changed = readme_results.table(results)
    assert "99.99 vs 64.81 (+35.18)" in changed and changed != readme_results.table()


def test_the_readme_names_the_commands_of_every_way_in():
    modules = {c[0] for c in readme_commands()}
    assert {"sdk", "trainer", "export", "lab", "scripts.bench_runtime", "scripts.fuzz_bundle"} <= modules


@pytest.mark.parametrize("command", readme_commands(), ids=" ".join)
def test_each_readme_command_runs_as_written(command):
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}  # as a user's shell has it
    result = subprocess.run([sys.executable, "-m", *command, "--help"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout
    assert "TelemetryWarning" not in result.stderr
