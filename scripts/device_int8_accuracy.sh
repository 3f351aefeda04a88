#!/usr/bin/env bash
# Issue 61's accuracy on a full-width GPU-trained bundle: train the full-width bench run on the lent GPU
# machine, export it in the recommended compact mode and send the bundle back in pieces; the int8 accuracy is
# then measured on the CPU machine (scripts/bench_int8.py), which can hold a 50 MB bundle but not train it.
#
#   bash scripts/device_int8_accuracy.sh NAME TRAIN_SECONDS          # train (or resume) for at most SECONDS
#   TAPER_CACHE=$PWD/.devcache bash scripts/device_int8_accuracy.sh NAME 0 export   # then export
#
# As scripts/device_run.sh: the data set's three parts arrive in earlier calls (.gpu/ti.part0..2, copied to
# /root/parts), .gpu/NAME is `python -m trainer prepare --preset bench --set width=1.0 --out .gpu/NAME` made
# on the CPU machine, and training resumes from its checkpoints in a later call on the same warm machine.
# The export call carries the exported text encoder (.devcache/text-encoder-v2, from ~/.cache/taper-sdk) for
# the bundle's concept embeddings. $OUT gets the bundle split into pieces of 15 MiB (bundle.part-*, joined
# here with cat and checked against bundle.sha256), the run's config.json and metrics.json.
set -euo pipefail
name=$1
budget=$2
source "$(dirname "$0")/device_common.sh"   # $data, $device, place_run, train_run
place_run "$name"
if [ "$budget" != 0 ]; then
  train_run "$name" "$budget"
fi
if [ "${3:-}" = export ]; then
  run="/root/runs/$name"
  [ -f "$run/stage3/model.safetensors" ] || { echo "$run is not trained yet (no stage3/model.safetensors)"; exit 1; }
  python3 -m export bundle "$run" --out "/root/$name.taper" --mode drop:0.04+subspace:8+fp16
  ls -la "/root/$name.taper"
  (cd /root && sha256sum "$name.taper") > "$OUT/bundle.sha256"
  split -b 15M -d -a 1 "/root/$name.taper" "$OUT/bundle.part-"
  cp "$run/config.json" "$run/metrics.json" "$OUT/" 2>/dev/null || cp "$run/config.json" "$OUT/"
  ls -la "$OUT"
fi
