#!/usr/bin/env bash
# Compile the Java core and its golden-vector test with the JDK alone, then run it.
# Usage: run_tests.sh <golden.json> <out dir>   (pytest's tests/test_android_core.py writes the vectors,
# calls this, then runs the weights the Java core wrote into <out dir> in onnxruntime)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
javac -Xlint:all,-serial -Werror -d "$build" $(find "$here/src" -name '*.java')
cp "$here/../../sdk/text/exocentric_compounds.txt" "$build/"   # the resolver's list (Compounds.java), one copy
java -cp "$build" org.taper.sdk.GoldenTest "$1" "$2"
