"""The Android side, built and checked in one command: `docs/results/android.json`.

    python -m scripts.android_build --fresh-setup-s 234 --out docs/results/android.json

1. `mvn package` on android_demo/pom.xml: the core, the ExecuTorch declarations and the app (R.java and
   resources.ap_ from aapt2, then javac with every lint as an error) -> `app_compiled`.
2. The app's OnnxEngine on the JVM (android_demo/app/src/test/.../OnnxEngineTest, onnxruntime's desktop JAR)
   against golden vectors of a bundle (`--bundle`, or the `tiny` preset trained here, ~1 min) -> `jvm_onnx`.
3. The APK, as far as this machine's registries allow -> `apk_bytes`, `apk_checks`: the resources and binary
   manifest (aapt2) are built and `aapt2 dump badging` reads them; dexing needs D8 (com.android.tools:r8,
   Google's Maven only) or a dexer for Java 17 class files, and the app's native libraries need the
   onnxruntime-android AAR, neither of which is served here (android_demo/README.md says what was tried).

`--fresh-setup-s` records the wall time of `make setup` on a fresh clone (measured by hand: it cannot be
measured again once the pip cache is warm).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from scripts import cpu
from scripts.results import write_result

ANDROID = Path(__file__).parents[1] / "android_demo"
# The dexer the issue names first and the one Maven Central serves: neither reads the core's class files.
DEXERS_TRIED = {
    "software.coley:dex-translator:1.1.1": "depends on com.android.tools:r8:8.3.0, not served by Maven Central",
    "com.jakewharton.android.repackaged:dalvik-dx:16.0.1": "refuses Java 17 class files "
                                                           "('unsupported class file version 61.0')",
}
AARS_TRIED = {
    "com.microsoft.onnxruntime:onnxruntime-android": "no maven-metadata.xml; 1.20.0 and 1.22.0 not found",
    "org.pytorch:executorch-android": "no maven-metadata.xml; 1.0.1 and 0.7.0 not found",
}


def maven(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mvn", "-B", "-q", "-f", str(ANDROID / "pom.xml"), *args], capture_output=True, text=True)


def golden_for(bundle: Path | None, work: Path) -> Path:
    from export.bundle import bundle_run
    from export.golden import write_golden

    if bundle is None:
        from trainer.run import run

        print("[android] training the tiny preset for a bundle (~1 min)")
        bundle = bundle_run(run(work / "run", "tiny", progress=False), work / "tiny.taper")
    return write_golden(bundle, work / "golden")


def apk_checks() -> dict:
    resources = ANDROID / "app" / "target" / "resources.ap_"
    badging = subprocess.run(["aapt2", "dump", "badging", str(resources)], capture_output=True, text=True)
    return {"resources_built": resources.exists(), "resources_bytes": resources.stat().st_size,
            "aapt2_dump_badging": badging.returncode == 0, "badging": badging.stdout.splitlines()[:3],
            "dexed": False, "dexers_tried": DEXERS_TRIED, "native_libraries": False, "aars_tried": AARS_TRIED,
            "zipaligned": False, "signed": False, "run_on_a_device": False}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, help="the bundle the engine test personalizes (default: tiny preset)")
    parser.add_argument("--fresh-setup-s", type=float, help="measured wall time of `make setup` on a fresh clone")
    parser.add_argument("--out", type=Path, default=Path("docs/results/android.json"))
    args = parser.parse_args(argv)
    if shutil.which("mvn") is None or shutil.which("aapt2") is None:
        parser.error("needs Maven and aapt2 (make setup installs aapt2 as root)")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        golden = golden_for(args.bundle, Path(tmp))
        report = Path(tmp) / "onnx_engine.json"
        built = maven("package", f"-Dtaper.golden={golden}", f"-Dtaper.report={report}")
        if built.returncode != 0:
            print(built.stdout[-3000:], built.stderr[-3000:])
        summary = json.loads(report.read_text()) if report.exists() else None
    result = {
        "app_compiled": built.returncode == 0,
        "apk_bytes": None,   # no APK: see apk_checks
        "apk_checks": apk_checks(),
        "jvm_onnx": None if summary is None else {
            "cases": summary["cases"], "images": summary["images"], "checks": summary["checks"],
            "within_tolerance": built.returncode == 0, "max_abs_diff": summary["max_abs_diff"],
            "worst_over_bound": summary["worst_over_bound"]},
        "fresh_setup_s": args.fresh_setup_s,
        "cpu": cpu.describe(),
        "command": "python -m scripts.android_build" + (f" --fresh-setup-s {args.fresh_setup_s:g}"
                                                        if args.fresh_setup_s else ""),
        "wall_s": round(time.perf_counter() - start, 1),
    }
    write_result(result, args.out)
    return 0 if result["app_compiled"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
