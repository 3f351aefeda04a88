"""A slice of the Java core's fuzz harness (scripts/java_fuzz.py; the 5,000-case run is docs/results/java_fuzz.md):
damaged bundles through both readers, every Java outcome typed or the Python load, and the two agreeing."""

import json
import shutil

import pytest

from scripts import java_fuzz


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK (javac)")
def test_the_java_core_refuses_what_python_refuses_and_loads_what_it_loads(tiny_bundle, tmp_path):
    out = tmp_path / "java_fuzz"
    java_fuzz.main(["--cases", "40", "--bundle", str(tiny_bundle), "--seed", "1", "--timeout", "60", "--out", str(out)])
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["cases"] == 40
    assert report["untyped"] == report["hangs"] == report["crashes"] == 0, report["examples"]
    assert report["disagreements"] == 0, report["examples"]
    assert report["java_totals"]["typed"] > 0   # the damage reached the reader


def test_loads_agree_only_on_the_same_task():
    a = {"outcome": "loaded", "classes": ["x", "y"], "alpha": [[0.5, 0.5]], "head": [[1.0, 0.0]]}
    assert java_fuzz.agree(a, dict(a))
    assert not java_fuzz.agree(a, {**a, "classes": ["y", "x"]})
    assert not java_fuzz.agree(a, {**a, "alpha": [[0.6, 0.4]]})
    assert not java_fuzz.agree(a, {"outcome": "typed", "error": "BundleException"})
    assert java_fuzz.agree({"outcome": "typed"}, {"outcome": "typed"})
    assert not java_fuzz.agree({"outcome": "escape"}, {"outcome": "typed"})
