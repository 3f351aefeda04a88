#!/usr/bin/env bash
# Compile the Java core and its golden-vector test with the JDK alone, then run it.
# Usage: run_tests.sh <golden.json> <out dir> [<classes>]   (pytest's tests/test_android_core.py writes the
#        vectors, calls this, then runs the weights the Java core wrote into <out dir> in onnxruntime)
#        run_tests.sh --compile <classes>   compile only, into <classes>: a run given <classes> skips javac
#        (the test compiles once for its four storage modes)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The JVM's flags here only make the run cheaper on CPU, never change what it computes: javac is a short run
# that C2 compiling javac itself does not repay (6.6 -> 2.8 CPU-s here), and the golden test is one thread
# that needs no parallel collector (17.7 -> 14.6 CPU-s on the fp32 vectors; 2026-11-29, experiments.md).
compile() {
    javac -J-XX:TieredStopAtLevel=1 -J-XX:+UseSerialGC -Xlint:all,-serial -Werror -d "$1" $(find "$here/src" -name '*.java')
    cp "$here/../../sdk/text/exocentric_compounds.txt" "$1/"   # the resolver's list (Compounds.java), one copy
}
if [ "${1:-}" = "--compile" ]; then
    compile "$2"
    exit 0
fi
if [ $# -ge 3 ]; then
    build="$3"
else
    build="$(mktemp -d)"
    trap 'rm -rf "$build"' EXIT
    compile "$build"
fi
java -XX:+UseSerialGC -cp "$build" org.taper.sdk.GoldenTest "$1" "$2"
