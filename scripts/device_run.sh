#!/usr/bin/env bash
# Train and evaluate a prepared run directory on the lent GPU machine (issue 12's "On a GPU" part).
#
#   bash scripts/device_run.sh NAME TRAIN_SECONDS [STAGE3_SEED]
#
# Expects, on that machine: the data set's three parts (split -n 3 of ../shared/data/tiny-imagenet-200.tar.gz,
# each under the 64 MiB a call may carry) in /root/parts/ or .gpu/, and .gpu/NAME/ holding the run's
# config.json and classes.safetensors, made on the CPU machine (the text encoder is not on the GPU one):
#   python -m trainer prepare --preset paper-b512 --out .gpu/NAME
# Training stops after TRAIN_SECONDS (it resumes from its checkpoints in a later call on the same machine);
# a finished run is evaluated on the GPU and its report, eval.json, metrics and log land in $OUT/NAME/, with
# the stage-2 diagnostics of `trainer bases` (bases.json: the uniform average of the stage-2 bases, which the
# report's "uniform average" row, taken after stage 3, does not show). With STAGE3_SEED (e.g. 1), stage 3 is
# trained again with that seed on the same stages 1-2 and the report gets the stage-3 seed spread (the
# paper-b512 run on an H100 took 7.2 min to train, 130 s of it stage 3, and 41 s to evaluate).
set -euo pipefail
name=$1
budget=$2
stage3_seed=${3:-}
source "$(dirname "$0")/device_common.sh"   # $data, $device, place_run, train_run
place_run "$name"
train_run "$name" "$budget"
seed_runs=()
if [ -n "$stage3_seed" ]; then
  seed_run="/root/runs/$name-s3seed$stage3_seed"   # the run's configuration, another stage-3 seed; stages 1-2 reused
  python3 -m trainer run --out "$seed_run" --reuse-from "/root/runs/$name" --set "stage3_seed=$stage3_seed" \
    --device "$device" > "$seed_run.out" 2>&1 \
    && seed_runs=(--seed-runs "$seed_run") || { echo "stage-3 seed run failed:"; tail -n 5 "$seed_run.out"; }
fi
python3 -m trainer eval "/root/runs/$name" --device "$device" "${seed_runs[@]}" --report "$OUT/$name/report" | tail -n 40
cp "/root/runs/$name/eval.json" "$OUT/$name/"
python3 -m lab bases "/root/runs/$name" --device "$device" --out "$OUT/$name/bases.json" > /dev/null
