"""The Android side, built and checked in one command: `docs/results/android.json`.

    python -m scripts.android_build --fresh-setup-s 234 --out docs/results/android.json

1. `mvn package` on android_demo/pom.xml: the core, the ExecuTorch declarations and the app (R.java and
   resources.ap_ from aapt2, then javac with every lint as an error) -> `app_compiled`.
2. The app's OnnxEngine on the JVM (android_demo/app/src/test/.../OnnxEngineTest, onnxruntime's desktop JAR)
   against golden vectors of a bundle (`--bundle`, or the `tiny` preset trained here, ~1 min) -> `jvm_onnx`.
3. The APK (android_demo/app/apk.sh, in the same `mvn package`): aapt2's resources, the classes dexed by D8
   (com.android.tools:r8 from Maven Central), zipaligned, signed with a debug key made at build time, and
   read back by aapt2, zipalign, apksigner and dexdump -> `apk_bytes`, `apk_checks`. It has no native
   libraries: the onnxruntime-android AAR is not served here (android_demo/README.md says what was tried).

`--fresh-setup-s` records the wall time of `make setup` on a fresh clone (measured by hand: it cannot be
measured again once the pip cache is warm).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from scripts import cpu
from scripts.results import write_result

ANDROID = Path(__file__).parents[1] / "android_demo"
AARS_TRIED = {
    "com.microsoft.onnxruntime:onnxruntime-android": "no maven-metadata.xml; 1.20.0, 1.22.0 and 1.23.2 not found",
    "org.pytorch:executorch-android": "no maven-metadata.xml; 1.0.1, 0.7.0 and 0.6.0 not found",
}


# Every JVM `mvn package` starts (Maven, javac, the JUnit fork, D8, keytool, apksigner) on C1 and the serial
# collector: short runs, where C2 and parallel GC threads cost more than they give back (33.1 -> 19.3 user
# CPU-s, 18.4 -> 15.6 s here). They change no output: the APK's classes.dex and resources.arsc are the same bytes
# with and without them (its signature differs on every build: the debug key is made anew; experiments.md).
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def maven(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """`mvn -B -q` on android_demo/pom.xml, its JVMs with JVM_OPTIONS."""
    return subprocess.run(["mvn", "-B", "-q", "-f", str(ANDROID / "pom.xml"), *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "JAVA_TOOL_OPTIONS": JVM_OPTIONS})


def golden_for(bundle: Path | None, work: Path) -> Path:
    from export.bundle import bundle_run
    from export.golden import write_golden

    if bundle is None:
        from trainer.run import run

        print("[android] training the tiny preset for a bundle (~1 min)")
        bundle = bundle_run(run(work / "run", "tiny", progress=False), work / "tiny.taper")
    return write_golden(bundle, work / "golden", refusals=False)   # OnnxEngineTest reads the vectors only


APK = ANDROID / "app" / "target" / "taper-demo.apk"
CORE_JARS = ANDROID / "core" / "target"   # taper-core-<version>.jar: its files other than classes app/apk.sh
#                                            puts at the APK's root (D8 keeps only classes): the resolver's word lists
DEXED = ("Lorg/taper/sdk/Personalizer;", "Lorg/taper/sdk/format/Bundle;", "Lorg/taper/demo/MainActivity;",
         "Lorg/taper/demo/OnnxEngine;", "Lai/onnxruntime/OrtSession;")


def apk_checks(apk: Path = APK) -> dict:
    """What the tools say of the APK app/apk.sh made: aapt2 reads its manifest and launcher, it is zipaligned,
    its signature verifies for the minSdk its manifest declares, dexdump reads every class of its dex (the
    core's, the app's and onnxruntime's Java classes among them), it holds the core's word lists at its root, and
    whether it holds native libraries."""
    import zipfile

    def run(*cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300)

    if not apk.exists():
        return {"built": False}
    badging = run("aapt2", "dump", "badging", str(apk))
    min_sdk = re.search(r"^sdkVersion:'(\d+)'", badging.stdout, re.MULTILINE)
    resources = []
    for jar in CORE_JARS.glob("taper-core-*.jar"):
        with zipfile.ZipFile(jar) as z:
            resources += [n for n in z.namelist() if not n.endswith((".class", "/")) and not n.startswith("META-INF/")]
    with zipfile.ZipFile(apk) as z, tempfile.TemporaryDirectory() as tmp:
        names = set(z.namelist())
        dex = Path(tmp) / "classes.dex"
        dex.write_bytes(z.read("classes.dex") if "classes.dex" in names else b"")
        dump = run("dexdump", "-l", "plain", str(dex))
    dumped = dump.returncode == 0 and "classes.dex" in names
    return {"built": True, "bytes": apk.stat().st_size,
            "aapt2_dump_badging": badging.returncode == 0 and "package: name='org.taper.demo'" in badging.stdout,
            "badging": badging.stdout.splitlines()[:3],
            "launchable_activity": "launchable-activity: name='org.taper.demo.MainActivity'" in badging.stdout,
            "zipaligned": run("zipalign", "-c", "-p", "4", str(apk)).returncode == 0,
            "signed": min_sdk is not None and run("apksigner", "verify", "--min-sdk-version", min_sdk.group(1),
                                                  str(apk)).returncode == 0,
            "dexdump": dumped, "classes": dump.stdout.count("Class descriptor  :") if dumped else 0,
            "core_and_app_dexed": dumped and all(f"Class descriptor  : '{c}'" in dump.stdout for c in DEXED),
            "dexer": "D8 (com.android.tools:r8, android_demo/pom.xml's r8.version), Java 17 class files, "
                     "min-api from app/build.gradle.kts",
            "resolver_word_lists": bool(resources) and set(resources) <= names, "core_resources": sorted(resources),
            "native_libraries": any(n.startswith("lib/") for n in names), "aars_tried": AARS_TRIED,
            "run_on_a_device": False}


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
        "apk_bytes": APK.stat().st_size if built.returncode == 0 and APK.exists() else None,
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
