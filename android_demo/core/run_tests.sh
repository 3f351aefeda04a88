#!/usr/bin/env bash
# Compile the Java core and its golden-vector test with the JDK alone, then run it.
# Usage: run_tests.sh <golden.json> <out dir> [<classes>]   compile (unless <classes> is given) and check one file
#        run_tests.sh --compile <classes>   compile only, into <classes>
#        run_tests.sh --classes <classes> <golden.json> <out dir> [<golden.json> <out dir> ...]   several files
#        in one JVM, compiled once (pytest's tests/test_android_core.py writes the vectors of its four storage
#        modes, calls this, then runs the weights the Java core wrote into each <out dir> in onnxruntime)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# The JVM's flags here only make the run cheaper on CPU, never change what it computes: javac is a short run
# that C2 compiling javac itself does not repay (6.6 -> 2.8 CPU-s here), and the golden test is one thread
# that needs no parallel collector (17.7 -> 14.6 CPU-s on the fp32 vectors; 2026-11-29, experiments.md). Its
# C2 thresholds are raised: it runs hundreds of methods hot enough for C2 by default but only for a moment, so
# that compiling them took half its CPU; the loops over millions of weights still reach C2 (fp32 and int8
# vectors in one JVM: 27.7 and 26.5 CPU-s by default, 20.9 and 22.1 with these; 2026-11-30, experiments.md).
JAVA=(java -XX:+UseSerialGC -XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=20000
      -XX:Tier4CompileThreshold=60000 -XX:Tier4BackEdgeThreshold=400000)
compile() {
    javac -J-XX:TieredStopAtLevel=1 -J-XX:+UseSerialGC -Xlint:all,-serial -Werror -d "$1" $(find "$here/src" -name '*.java')
    # the resolver's word lists (Compounds.java, EnglishWords.java): sdk/text's .txt and .txt.gz files, the one copy
    cp "$here"/../../sdk/text/*.txt "$here"/../../sdk/text/*.txt.gz "$1/"
}
if [ "${1:-}" = "--compile" ]; then
    compile "$2"
    exit 0
fi
if [ "${1:-}" = "--classes" ]; then
    classes="$2"
    shift 2
    exec "${JAVA[@]}" -cp "$classes" org.taper.sdk.GoldenTest "$@"
fi
if [ $# -ge 3 ]; then
    build="$3"
else
    build="$(mktemp -d)"
    trap 'rm -rf "$build"' EXIT
    compile "$build"
fi
"${JAVA[@]}" -cp "$build" org.taper.sdk.GoldenTest "$1" "$2"
