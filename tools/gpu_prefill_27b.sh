#!/usr/bin/env bash
# gpu_prefill_27b.sh - where qwen3.5-27b's 512-token prefill goes on the H200 (issue 10's
# last floor: pp512 >= 1,335 tok/s), in one device call of ~6 minutes after
# tools/device_bench.sh has built pooled there:
#   tools/device_bench.sh run 'bash tools/gpu_prefill_27b.sh'      (carry [".devbench"])
# It synthesises the 27B (Q4_0), runs `pooled bench -p 512 -n 0 -r 3`, then one profiled
# run (each op of the 512-token step replayed alone: $OUT/prof27.txt; printed here are its
# summary lines and the ops' microseconds summed per kind), then build/gemm_lab over the 27B's matmul shapes at n = 512 with TILES
# (tm,tn,rm,rn,bk,version; at most 16; default: the pinned tiles and their neighbours).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/prefill-27b}
mkdir -p "$OUT"
B=build/pooled
M=/tmp/m27.gguf
[ -f "$M" ] || { time $B synth --preset qwen3.5-27b --type q4_0 -o "$M" --threads 16 >/dev/null; }
$B bench -m "$M" --backend webgpu -p 512 -n 0 -r 3 2>&1 | tail -3
rm -f "$OUT/prof27.txt"
POOLED_GPU_PROFILE=$OUT/prof27.txt POOLED_GPU_PROFILE_AT=1 $B bench -m "$M" --backend webgpu \
    -p 512 -n 0 -r 1 2>&1 | tail -2
if [ -f "$OUT/prof27.txt" ]; then
    grep -vE '^op ' "$OUT/prof27.txt"
    # "op N KIND ... T us": T summed per KIND
    awk '$1 == "op" { for (i = 4; i <= NF; i++) if ($i == "us") { t[$3] += $(i - 1); n[$3]++; break } }
         END { for (k in t) printf "%-12s %5d ops %10.1f us\n", k, n[k], t[k] }' "$OUT/prof27.txt" | sort -k4 -rn
fi
make -j"$(nproc)" build/gemm_lab >/dev/null || { echo "gpu_prefill_27b: gemm_lab build failed"; exit 2; }
TILES=${TILES:-"64,64,4,4,4,10 64,64,4,4,2,10 64,64,4,4,8,10 32,64,2,4,2,10 32,64,2,4,4,10
64,128,4,8,2,10 64,128,4,8,4,10 128,64,8,4,2,10 128,64,8,4,4,10 32,128,2,8,2,10
32,128,2,8,4,10 128,128,8,8,2,10 64,64,4,4,4,9 64,32,4,2,4,10 128,64,8,4,2,4 64,128,4,8,2,8"}
args=()
for t in $TILES; do args+=(--tile "$t"); done
timeout 300 build/gemm_lab --model 27b --n 512 --type q4_0 "${args[@]}"
