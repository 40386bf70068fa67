#!/usr/bin/env bash
# gemm_sweep.sh - the prefill GEMM's versions 8-10 (wgsl_gemm.c: double-buffered staging)
# against the pinned tiles, on the device in one call of ~2 minutes (docs/gpu-notes.md,
# "Eighth session: GEMM v8+"): build/gemm_lab over the 27B's and then the 8B's Q4_0 matmul
# shapes at n = 512, each tile checked against the CPU reference (err) and timed (us,
# TOP/s). A tile whose staging is past the adapter's workgroup memory runs with fewer
# blocks per step (the label says which). Each model is cut off after its time limit
# (what it printed stays). Usage, from the repository root on the H200:
#   tools/device_bench.sh run 'bash tools/gemm_sweep.sh'
set -uo pipefail
cd "$(dirname "$0")/.."
make -j"$(nproc)" build/gemm_lab >/dev/null || { echo "gemm_sweep: build failed"; exit 2; }
# tm,tn,rm,rn,bk,version: the pinned v4 (gate/up) and v3 (the rest), then v8 (v4
# double-buffered), v9 (v3 double-buffered), v10 (v8, warps of 8 columns x 4 rows)
tiles="128,64,8,4,2,4 64,64,4,4,4,3
128,64,8,4,2,8 64,64,4,4,4,8 64,64,4,4,2,8 64,128,4,8,2,8
128,64,8,4,2,9 64,64,4,4,4,9 128,64,8,4,4,9
128,64,8,4,2,10 64,64,4,4,4,10 64,64,4,4,2,10"
args=()
for t in $tiles; do args+=(--tile "$t"); done
rc=0
for m in 27b:110 8b:70; do
    echo "### gemm_lab --model ${m%:*} --n 512 --type q4_0 (12 tiles)"
    timeout "${m#*:}" build/gemm_lab --model "${m%:*}" --n 512 --type q4_0 "${args[@]}" || rc=$?
done
exit $rc
