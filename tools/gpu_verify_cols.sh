#!/usr/bin/env bash
# gpu_verify_cols.sh - the several-column GEMV's shape on the H200 (issues 12 and 14), in one
# device call after tools/device_bench.sh has built pooled there:
#   tools/device_bench.sh prepare            (here)
#   tools/device_bench.sh run 'bash tools/gpu_verify_cols.sh'     (carry [".devbench"])
# On `pooled synth --preset qwen3-8b --type q4_0` (PRESET): pp512 / tg128 at the start and the end of
# the call, then for each POOLED_GPU_MC shape of MCS ("" = the per-type default, 2,8 for
# Q4_0) a verify pass's cost (`bench -p 128 -n 0 -r 5 --verify-cost 7,15`: ms per pass and
# its ratio to one step; issue 12 asks <= 1.5x at K = 7), then for each of STREAMS_MCS the
# aggregate decode of 1, 16 and 64 streams (`--streams 1,16,64 -p 128 -n 64 --ctx 512`;
# issue 14 asks 6x one stream at 16 and llama.cpp CUDA's 4,626 tok/s at 64). About 6-8
# minutes. Output: stdout and $OUT/verify-cols.txt.
set -u
OUT=${OUT:-/tmp/verify-cols}
MCS=${MCS:-" 2,4 3,12 1,8 2,6 4,16"}
STREAMS_MCS=${STREAMS_MCS:-" 2,4 3,12"}
P=build/pooled
PRESET=${PRESET:-qwen3-8b}
SYNTH_ARGS=${SYNTH_ARGS:-} # e.g. "--layers 2 --vocab 4096" to try the script on a small file
M=/tmp/verify-cols-$PRESET.gguf
mkdir -p "$OUT"
R=$OUT/verify-cols.txt
: >"$R"
say() { echo "$*" | tee -a "$R"; }
t0=$(date +%s)
[ -f "$M" ] || $P synth --preset "$PRESET" --type q4_0 -o "$M" --threads 16 $SYNTH_ARGS >/dev/null 2>&1 ||
    { say "gpu_verify_cols: synth failed"; exit 2; }
say "synth done at $(( $(date +%s) - t0 )) s"
B="$P bench -m $M --backend webgpu"
say "== default: pp512 / tg128"
$B -p 512 -n 128 -r 3 2>&1 | grep -E "^(prefill|first id|decode|weights|backend)" | tee -a "$R"
for mc in "" $MCS; do
    say "== MC=${mc:-default}: verify"
    POOLED_GPU_MC=$mc $B -p 128 -n 0 -r 5 --verify-cost 7,15 2>&1 |
        grep -E "^verify +(at|[0-9])" | tee -a "$R"
done
for mc in "" $STREAMS_MCS; do
    say "== MC=${mc:-default}: streams"
    POOLED_GPU_MC=$mc $B -p 128 -n 64 -r 1 --streams 1,16,64 --ctx 512 2>&1 |
        grep -E "^streams" | tee -a "$R"
done
say "== default again: pp512 / tg128"
$B -p 512 -n 128 -r 3 2>&1 | grep -E "^(prefill|first id|decode)" | tee -a "$R"
say "total $(( $(date +%s) - t0 )) s"
