"""The Android app's Maven build (android_demo/pom.xml): the core and the app compile (the app against the
Android framework, onnxruntime's Java API and ExecuTorch's declarations, R.java from aapt2), and the app's
OnnxEngine, run on the JVM with onnxruntime's desktop JAR, gives the Python runtime's logits on every golden
case, float32 and int8 (android_demo/app/src/test/.../OnnxEngineTest). The versions Maven pins are the
Gradle catalog's."""

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from export.golden import write_golden
from scripts.android_build import apk_checks, maven

ANDROID = Path(__file__).parents[1] / "android_demo"
FRAMEWORK_RES = Path("/usr/share/android-framework-res/framework-res.apk")


def missing_tools() -> str | None:
    """What the Java build needs that this machine lacks (set-up installs aapt2 and framework-res as root)."""
    missing = [t for t in ("javac", "mvn", "aapt2", "zipalign", "apksigner", "dexdump") if shutil.which(t) is None]
    missing += [] if FRAMEWORK_RES.exists() else [str(FRAMEWORK_RES)]
    return ", ".join(missing) or None


# Skipped only where a tool is missing, never in CI (.ci/run): there a missing tool is a failure.
needs_java = pytest.mark.skipif(missing_tools() is not None and not os.environ.get("CI"),
                                reason=f"needs {missing_tools()}")


def pom_properties() -> dict[str, str]:
    text = (ANDROID / "pom.xml").read_text()
    block = text.split("<properties>", 1)[1].split("</properties>", 1)[0]
    return dict(re.findall(r"<([\w.-]+)>([^<]*)</\1>", block))


def catalog_versions() -> dict[str, str]:
    text = (ANDROID / "gradle" / "libs.versions.toml").read_text()
    block = text.split("[versions]", 1)[1].split("[", 1)[0]
    return dict(re.findall(r'^(\S+)\s*=\s*"([^"]+)"', block, re.MULTILINE))


def test_maven_pins_the_gradle_catalogs_versions():
    pom, gradle = pom_properties(), catalog_versions()
    assert pom["onnxruntime.version"] == gradle["onnxruntime"]
    assert pom["executorch.version"] == gradle["executorch"]
    # android-all's API level is the app's compileSdk.
    compile_sdk = re.search(r"compileSdk = (\d+)", (ANDROID / "app" / "build.gradle.kts").read_text()).group(1)
    api = {"15": "35", "16": "36", "14": "34"}[pom["android.all.version"].split("-")[0]]
    assert api == compile_sdk
    # Every plugin version is pinned (a build that floats is not reproducible).
    plugins = re.findall(r"<plugin>\s*<groupId>[^<]+</groupId>\s*<artifactId>([^<]+)</artifactId>\s*(<version>)?",
                         (ANDROID / "pom.xml").read_text())
    assert plugins and all(version for _, version in plugins), plugins


@needs_java
def test_the_app_compiles_and_its_onnx_engine_gives_the_python_logits(tiny_bundle, tmp_path):
    golden = write_golden(tiny_bundle, tmp_path / "golden", refusals=False)   # OnnxEngineTest reads the vectors
    report = tmp_path / "onnx_engine.json"
    result = maven("package", f"-Dtaper.golden={golden}", f"-Dtaper.report={report}")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    # The app's classes are there (MainActivity with aapt2's R, both engines), and the test ran, not skipped.
    classes = ANDROID / "app" / "target" / "classes" / "org" / "taper" / "demo"
    assert {"MainActivity.class", "OnnxEngine.class", "ExecuTorchEngine.class", "R.class"} <= {
        p.name for p in classes.iterdir()}
    surefire = (ANDROID / "app" / "target" / "surefire-reports" / "TEST-org.taper.demo.OnnxEngineTest.xml").read_text()
    assert 'tests="1"' in surefire and 'skipped="0"' in surefire and 'failures="0"' in surefire
    spec, summary = json.loads(golden.read_text()), json.loads(report.read_text())
    assert summary["cases"] == len(spec["cases"]) >= 5 and summary["images"] == len(spec["images"])
    assert summary["checks"] == 3 * len(spec["cases"]) * len(spec["images"])   # float32, int8 graph, int8 path
    assert all(0 <= v <= 1 for v in summary["worst_over_bound"].values())
    # The APK app/apk.sh made in `mvn package` (resources, dex, zipalign, signature), read back by the tools.
    checks = apk_checks(ANDROID / "app" / "target" / "taper-demo.apk")
    assert all(checks[k] for k in ("aapt2_dump_badging", "launchable_activity", "zipaligned", "signed",
                                   "dexdump", "core_and_app_dexed", "resolver_word_lists")), checks
    assert not checks["native_libraries"] and checks["classes"] > 100   # no onnxruntime-android AAR here

