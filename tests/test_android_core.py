import shutil
import subprocess
from pathlib import Path

import pytest

from export.golden import write_golden

CASES = [["red disc", "blue ring", "yellow square"], ["green stripes"], ["s00000003", "red checkerboard"]]


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK (javac)")
@pytest.mark.parametrize("mode", ["fp32", "drop:0.05+lowrank:2+fp16", "int8", "subspace:3+fp16"])
def test_java_core_matches_the_python_runtime(tiny_bundle, tiny_run, tmp_path, mode):
    """Plain bases, and compact ones in every delta storage (the golden bundle is exported in `mode`)."""
    from export.bundle import bundle_run

    bundle = tiny_bundle if mode == "fp32" else bundle_run(tiny_run, tmp_path / "compact.taper", mode=mode)
    golden = write_golden(bundle, tmp_path / "golden", CASES)
    script = Path(__file__).parents[1] / "android_demo" / "core" / "run_tests.sh"
    result = subprocess.run(["bash", str(script), str(golden)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(CASES) * 5 + 10} passed, 0 failed" in result.stdout
