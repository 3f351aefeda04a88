#!/usr/bin/env bash
# Compile the Java core and its golden-vector test with the JDK alone, then run it.
# Usage: run_tests.sh <golden.json>   (pytest's tests/test_android_core.py writes the vectors and calls this)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
javac -d "$build" $(find "$here/src" -name '*.java')
java -cp "$build" org.taper.sdk.GoldenTest "$1"
