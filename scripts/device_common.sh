# Sourced by the device scripts (scripts/device_run.sh, scripts/device_run_conditions.sh) on the lent GPU
# machine, where there is no ../shared: puts the data set at $data, and gives `place_run` and
# `train_run`. The data set's three parts (split -n 3 of ../shared/data/tiny-imagenet-200.tar.gz, each
# under the 64 MiB a call may carry) arrive in /root/parts/ or .gpu/, one call at a time; the joined file
# is checked against the README's SHA-256 before use. $device: cuda, or cpu (TAPER_DEVICE=cpu) to run a
# script's plumbing on the CPU machine on a tiny prepared run.
data=../shared/data/tiny-imagenet-200.tar.gz
sha=373810002cccd58cc4de79415e73072e6afd14a896072c9d268ad6854156ac35   # ../shared/data/README.md
device=${TAPER_DEVICE:-cuda}
export PYTHONUNBUFFERED=1

if [ ! -f "$data" ]; then
  mkdir -p ../shared/data /root/parts
  cp .gpu/ti.part* /root/parts/ 2>/dev/null || true
  cat /root/parts/ti.part0 /root/parts/ti.part1 /root/parts/ti.part2 > "$data.tmp"
  echo "$sha  $data.tmp" | sha256sum -c --quiet
  mv "$data.tmp" "$data"
fi

# place_run NAME: the prepared run directory .gpu/NAME in /root/runs (once), $OUT/NAME, the decoded cache.
place_run() {
  mkdir -p /root/runs "$OUT/$1"
  [ -d "/root/runs/$1" ] || cp -r ".gpu/$1" "/root/runs/$1"
  python3 -m trainer cache --data "$data"
}

# train_run NAME SECONDS: train (or resume) the run for at most SECONDS; its metrics and log go to $OUT/NAME.
# A run cut off by the limit ends the script (exit 0): a later call on the same warm machine resumes it.
train_run() {
  local rc
  set +e
  timeout "$2" python3 -m trainer run --out "/root/runs/$1" --device "$device" > "/root/runs/$1.out" 2>&1
  rc=$?
  set -e
  tail -c 4000 "/root/runs/$1.out" | tr '\r' '\n' | grep -v 'step/s' | tail -n 25 || true
  cp "/root/runs/$1/metrics.json" "/root/runs/$1/log.jsonl" "$OUT/$1/" 2>/dev/null || true
  if [ "$rc" != 0 ]; then
    echo "training stopped (rc $rc); checkpoints are in /root/runs/$1"
    exit 0
  fi
}
