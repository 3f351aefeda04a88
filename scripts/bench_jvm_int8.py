"""What the app's OnnxEngine pays per int8 model on the JVM, beside the Python runtime's routes, in one run:
docs/results/jvm_int8.json.

    python -m scripts.bench_jvm_int8 [--repeats 15]

The Python runtime gives each int8 model a session whose onnxruntime-optimized graph was made once per
bundle and whose values it reads from the model's graph bytes as an in-memory file (sdk/engines/int8_session.py),
in two halves made at once. onnxruntime's Java API (the app's) has no in-memory external files, so the
app's OnnxEngine makes a fresh session of the QDQ graph per model. This measures that fresh session on the
JVM (android_demo/app/src/bench/.../Int8SessionBench, onnxruntime's desktop JAR of the app's version),
and Python's routes (`scripts.bench_int8.session_routes`) on the same model: the random full-width compact
bundle of bench_int8, 224 px (the JVM's graph ends at the features, as the Java core writes it; Python's
carries the head as a Gemm on two inputs; onnxruntime 1.20.0 on the JVM, the Python runtime's 1.31.1).
Desktop JVM and x86: a phone's cost is another, its ratio is the question.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import sdk
from scripts import cpu
from scripts.bench_int8 import compact_random_bundle, session_routes
from scripts.results import write_result
from sdk.engines.int8 import Int8Plan

ANDROID = Path(__file__).parents[1] / "android_demo"
BENCH = ANDROID / "app" / "src" / "bench" / "java" / "org" / "taper" / "demo" / "Int8SessionBench.java"
MODE = "drop:0.04+subspace:8+fp16"


def maven(*args: str) -> None:
    subprocess.run(["mvn", "-B", "-q", "-f", str(ANDROID / "pom.xml"), *args], check=True)


def jvm_timing(graph: Path, size: int, repeats: int, work: Path) -> dict:
    """Int8SessionBench on `graph`, compiled against the app's classes and its Maven class path."""
    classpath_file = work / "classpath.txt"   # each module writes it; the app, built last, last
    maven("package", "-DskipTests", "dependency:build-classpath", f"-Dmdep.outputFile={classpath_file}")
    classpath = ":".join([str(ANDROID / "app" / "target" / "classes"), classpath_file.read_text().strip()])
    out = work / "bench-classes"
    subprocess.run(["javac", "-d", str(out), "-cp", classpath, str(BENCH)], check=True)
    # At run time the engine needs the core and onnxruntime, not the Android framework's classes.
    runtime = ":".join(p for p in classpath.split(":") if "android-all" not in p)
    done = subprocess.run(["java", "-cp", f"{out}:{runtime}", "org.taper.demo.Int8SessionBench", str(graph),
                           str(size), str(repeats)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"Int8SessionBench failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--out", type=Path, default=Path("docs/results/jvm_int8.json"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bundle = sdk.load(compact_random_bundle(work / "wide.taper", args.size, MODE),
                          providers=["CPUExecutionProvider"], threads=2).warm_up()
        model = sdk.personalize(bundle, "insect 0, insect 8, dog 1", precision="int8")
        # The graph the Java core writes (image -> features; the head stays in Java), from the same weights.
        _, folded = bundle.folded_weights(bundle.fused_weights(model.alpha))
        features_graph = Int8Plan(bundle.bundle.member_bytes("backbone.onnx"), bundle.preprocessing).quantize(
            folded, bundle.bundle.bases.mixed_channels(model.alpha))
        graph = work / "int8.onnx"
        graph.write_bytes(features_graph)
        python = session_routes(model, args.size, args.repeats, threads=2)
        jvm = jvm_timing(graph, args.size, args.repeats, work)
    result = {"mode": MODE, "size": args.size, "graph_bytes": len(features_graph),
              "jvm_onnx_engine": jvm, "python_routes": python,
              "jvm_over_python_route": round(jvm["open_quantized_backbone_ms"]
                                             / min(r["per_model_ms"] for r in python.values() if r["per_model_ms"]),
                                             2),
              "cpu": cpu.describe(), "command": "python -m scripts.bench_jvm_int8 " + " ".join(sys.argv[1:])}
    write_result(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
