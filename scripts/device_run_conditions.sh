#!/usr/bin/env bash
# Issue 50's "On a GPU" part: the `conditions` preset at width 1.0 on the lent GPU machine, then its report.
#
#   bash scripts/device_run_conditions.sh NAME TRAIN_SECONDS
#
# Made on the CPU machine first (the text encoder is not on the GPU one), with the data set's parts as
# scripts/device_common.sh says:
#   python -m trainer prepare --preset conditions --set width=1.0 --out .gpu/NAME
# On the GPU machine: the decoded cache, then the condition cache (8 conditions at once, `--workers`; the
# same bytes as a serial build), then the run with `--device cuda` (each condition's training images
# on the GPU), stopped after TRAIN_SECONDS (a later call on the same warm machine resumes it from its
# checkpoints). A finished run is scored by lab/condition_report.py on the GPU, without the headroom
# networks (rows (a) and (e) are width 0.25's); its report lands in $OUT/NAME/. Nothing depends on it:
# no GPU has been lent to this task so far, and this script has run on none (the CUDA path's data
# handling is tested on the CPU: tests/test_conditions.py).
set -euo pipefail
name=$1
budget=$2
source "$(dirname "$0")/device_common.sh"   # $data, $device, place_run, train_run

place_run "$name"
python3 -m trainer.data.condition_cache "$data" --workers 8 | tail -n 3
train_run "$name" "$budget"
python3 -m lab.condition_report "/root/runs/$name" --device "$device" --out "$OUT/$name/conditions" | tail -n 30
cp "/root/runs/$name/condition_cells.json" "$OUT/$name/"
