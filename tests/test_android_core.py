import shutil
import subprocess
from pathlib import Path

import pytest

from export.golden import write_golden

CASES = [["red disc", "blue ring", "yellow square"], ["green stripes"], ["s00000003", "red checkerboard"]]


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK (javac)")
def test_java_core_matches_the_python_runtime(tiny_bundle, tmp_path):
    golden = write_golden(tiny_bundle, tmp_path / "golden", CASES)
    script = Path(__file__).parents[1] / "android_demo" / "core" / "run_tests.sh"
    result = subprocess.run(["bash", str(script), str(golden)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(CASES) * 5 + 10} passed, 0 failed" in result.stdout
