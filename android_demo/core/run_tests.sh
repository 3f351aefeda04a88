#!/usr/bin/env bash
# Compile the Java core and its golden-vector test with the JDK alone, then run it.
# Usage: run_tests.sh <golden.json> <out dir> [<classes>]   (pytest's tests/test_android_core.py writes the
#        vectors, calls this, then runs the weights the Java core wrote into <out dir> in onnxruntime)
#        run_tests.sh --compile <classes>   compile only, into <classes>: a run given <classes> skips javac
#        (the test compiles once for its four storage modes)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
compile() {
    javac -Xlint:all,-serial -Werror -d "$1" $(find "$here/src" -name '*.java')
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
java -cp "$build" org.taper.sdk.GoldenTest "$1" "$2"
