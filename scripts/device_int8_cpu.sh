#!/usr/bin/env bash
# int8 against float32 on the lent GPU machine's CPU (issue 61, part 5: "what a CPU with VNNI/AMX does"; this
# machine has AVX2 only). Timing only: random full-width bundles, nothing trained, no data set needed.
#
#   bash scripts/device_int8_cpu.sh
#
# Carried from the CPU machine (both ignored by git, named in the call's `carry`):
#   .devcache/text-encoder-v2/   the exported text encoder (random_bundle embeds its class names with it;
#                                nothing can be downloaded there): cp -r ~/.cache/taper-sdk/text-encoder-v2 .devcache/
#   .whl/                        onnxruntime==1.31.1 for Python 3.12 (the version this machine runs; that one has
#                                1.30): pip download --no-deps --only-binary=:all: --python-version 3.12 ...
# Writes to $OUT: cpu.txt (lscpu and the flags line) and int8_cpu_t{2,4,all}.json (scripts.bench_int8
# --full-width-only at 224 and 64 px, recommended compact mode, 2 threads, 4 threads, onnxruntime's default).
set -euo pipefail
export PYTHONUNBUFFERED=1 TAPER_CACHE=$PWD/.devcache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD
python3 -c "import onnxruntime, numpy, torch; print('onnxruntime', onnxruntime.__version__, 'numpy', numpy.__version__, 'torch', torch.__version__)"
{ lscpu; grep -m1 '^flags' /proc/cpuinfo; } > "$OUT/cpu.txt" 2>&1 || true
grep -E 'Model name|^CPU\(s\)|Thread|Socket' "$OUT/cpu.txt" || true
# The fusion kernel, built as setup's ext-modules entry builds it (sdk/fusion/native.py finds it by module name).
suffix=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
gcc -O3 -Wno-psabi -shared -fPIC sdk/fusion/_fusion_kernel.c -o "sdk/fusion/_fusion_kernel$suffix" || echo "no fusion kernel: numpy fuses"
for threads in 2 4 all; do
  flag=(); [ "$threads" = all ] || flag=(--threads "$threads")
  python3 -m scripts.bench_int8 --full-width-only --full-width 224 64 "${flag[@]}" \
    --full-width-modes drop:0.04+subspace:8+fp16 --out "$OUT/int8_cpu_t$threads" > "$OUT/int8_cpu_t$threads.log" 2>&1 \
    || { echo "threads $threads failed:"; tail -n 20 "$OUT/int8_cpu_t$threads.log"; continue; }
  python3 - "$OUT/int8_cpu_t$threads.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for key, row in r["full_width"].items():
    print(r["threads"], key, "inference", row["inference_ms_batch1"], row["inference_over_fp32_session"],
          "personalize", row["personalize_ms"], "steps", row["int8_steps_ms"],
          "routes", {k: v["session_ms"] for k, v in row["session_routes"].items()})
print("wall", r["wall_s"], r["cpu"])
EOF
done
