#!/usr/bin/env bash
# The APK from what `mvn package` built before it: target/resources.ap_ (resources.sh: compiled resources
# and binary manifest), the core's and the app's classes and onnxruntime's Java classes dexed by D8
# (com.android.tools:r8, the version pom.xml pins, copied to target/apk-inputs by maven-dependency-plugin:
# Java 17 class files, records and List.of desugared for minSdk), zipaligned, and signed with a debug key
# made here. Writes target/taper-demo.apk; run by app/pom.xml in package, by hand: bash app/apk.sh
#
# What it lacks (android_demo/README.md): onnxruntime's native libraries (lib/arm64-v8a, lib/x86_64) come
# in the onnxruntime-android AAR, which Maven Central does not serve; its Java classes here are the desktop
# JAR's (the same ai.onnxruntime API, natives left out). Not run on a device: there is no emulator here.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
target="$here/target"
inputs="$target/apk-inputs"
work="$target/apk"
# minSdk as the manifest aapt2 compiled carries it (resources.sh took it from build.gradle.kts: one owner)
min_sdk=$(aapt2 dump badging "$target/resources.ap_" | sed -n "s/^sdkVersion:'\([0-9]*\)'$/\1/p")
rm -rf "$work" "$target/taper-demo.apk"
mkdir -p "$work/ort"
# onnxruntime's Java classes only: its desktop natives (ai/onnxruntime/native/linux-x64) are no Android code.
(cd "$work/ort" && unzip -q "$inputs/onnxruntime.jar" 'ai/onnxruntime/*.class' && jar cf ../onnxruntime-classes.jar ai)
java -cp "$inputs/r8.jar" com.android.tools.r8.D8 --release --min-api "$min_sdk" --lib "$inputs/android-all.jar" \
  --output "$work/dex.zip" "$here"/../core/target/taper-core-*.jar "$target"/taper-app-*.jar \
  "$work/onnxruntime-classes.jar"
cp "$target/resources.ap_" "$work/unaligned.apk"
(cd "$work" && unzip -q dex.zip classes.dex && zip -q unaligned.apk classes.dex)
# The core's Java resources, the resolver's word lists (Compounds.java and EnglishWords.java read them from the
# class path's root): D8 keeps only classes, so every file of the core's jar but its classes and META-INF goes at
# the APK's root, where Android's class loader finds it.
mkdir "$work/core-resources"
(cd "$work/core-resources" && unzip -q "$here"/../core/target/taper-core-*.jar -x '*.class' 'META-INF/*' \
  && zip -q -r ../unaligned.apk .)
zipalign -p -f 4 "$work/unaligned.apk" "$work/aligned.apk"
keytool -genkeypair -keystore "$work/debug.keystore" -storepass android -keypass android -alias androiddebugkey \
  -keyalg RSA -keysize 2048 -validity 10000 -dname "CN=Android Debug,O=Android,C=US" >/dev/null 2>&1
apksigner sign --ks "$work/debug.keystore" --ks-pass pass:android --key-pass pass:android \
  --out "$target/taper-demo.apk" "$work/aligned.apk"
echo "apk.sh: $target/taper-demo.apk ($(stat -c %s "$target/taper-demo.apk") bytes)"
