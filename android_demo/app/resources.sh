#!/usr/bin/env bash
# The app's resources with aapt2 (Debian's, against its framework-res.apk): what the Android Gradle plugin
# does before javac. Writes target/resources.ap_ (the compiled resources and binary manifest the APK starts
# from) and target/generated-sources/aapt2/org/taper/demo/R.java (the ids MainActivity compiles against).
# Run by app/pom.xml in generate-sources; by hand: bash app/resources.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
target="$here/target"
framework=${ANDROID_FRAMEWORK_RES:-/usr/share/android-framework-res/framework-res.apk}
if ! command -v aapt2 >/dev/null || [ ! -f "$framework" ]; then
  echo "resources.sh: needs aapt2 and $framework (Debian: apt-get install aapt android-framework-res)" >&2
  exit 1
fi
rm -rf "$target/aapt2" "$target/generated-sources/aapt2" "$target/resources.ap_"
mkdir -p "$target/aapt2" "$target/generated-sources/aapt2"
# Gradle names the package in app/build.gradle.kts (namespace); aapt2 wants it in the manifest, as AGP's
# manifest merger writes it.
namespace=$(sed -n 's/^ *namespace = "\(.*\)"/\1/p' "$here/build.gradle.kts")
sed "s#<manifest #<manifest package=\"$namespace\" #" "$here/src/main/AndroidManifest.xml" > "$target/aapt2/AndroidManifest.xml"
# minSdk, targetSdk and the version as build.gradle.kts has them (one owner).
gradle() { sed -n "s/^ *$1 = \"\{0,1\}\([^\"]*\)\"\{0,1\}$/\1/p" "$here/build.gradle.kts"; }
aapt2 compile --dir "$here/src/main/res" -o "$target/aapt2/res.zip"
aapt2 link -o "$target/resources.ap_" -I "$framework" --manifest "$target/aapt2/AndroidManifest.xml" \
  --java "$target/generated-sources/aapt2" --min-sdk-version "$(gradle minSdk)" \
  --target-sdk-version "$(gradle targetSdk)" --version-code "$(gradle versionCode)" \
  --version-name "$(gradle versionName)" "$target/aapt2/res.zip"
