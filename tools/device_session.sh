#!/usr/bin/env bash
# device_session.sh gpu|cpu - the measurements still owed on the H200 machine, in two device
# calls of under 10 minutes each, after tools/device_bench.sh has built pooled there:
#   tools/device_bench.sh prepare && cp ../shared/tools/llama.cpp-b10573-cpu.tar.xz .devbench/
#   tools/device_bench.sh run 'bash tools/device_session.sh gpu'     (carry [".devbench"])
#   tools/device_bench.sh run 'bash tools/device_session.sh cpu'
# gpu: issue 10 (27B and MoE decode with POOLED_GPU_XPRE=0/1/2 side by side, the DeltaNet
#      decode merged in the fifth session unmeasured, per-op profiles), issue 12 (the cost of
#      a verify pass of 1 + K columns, K = 1, 3, 7, 15, on the 8B and the 27B), issue 13
#      (--kv q8 against f16 at depth; the subgroup-matrix probe and lab when gemm_lab has
#      them), issue 11 (a room of 2 processes on the one GPU against one process), issue 14
#      (bench --streams 1,4,16,64: aggregate decode tok/s and time to first id).
# cpu: issue 15 (tools/cpu_device_bench.sh: pooled against llama.cpp at 16 threads).
# Everything goes to stdout and $OUT; models are synthesised into /tmp/ds and removed.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device-session}
B=${BIN:-build/pooled}
M=/tmp/ds
mkdir -p "$OUT" "$M"
lscpu | grep -E "Model name|^CPU\(s\)"
grep -q avx512f /proc/cpuinfo && echo "cpu: avx512f" || echo "cpu: no avx512f"
grep -q avx512_vnni /proc/cpuinfo && echo "cpu: avx512_vnni"
# synth PRESET: the Q4_0 file of a preset, made once
synth() {
    [ -f "$M/$1.gguf" ] || "$B" synth --preset "$1" --type q4_0 -o "$M/$1.gguf" --threads 16 \
        >/dev/null 2>&1 || echo "synth $1 failed"
}
# bench FILE ARGS...: pooled bench on the GPU, the lines that matter
bench() {
    local f=$1
    shift
    timeout 150 "$B" bench -m "$M/$f.gguf" --backend webgpu "$@" 2>&1 | grep -Ev '^(model|backend|load)'
}
t0=$(date +%s)
case ${1:-} in
gpu)
    # the subgroup matrices (issue 13): what the adapter offers, the lab's versions 5-7
    # against the portable GEMM at the 8B shapes, then greedy ids and pp512 per version
    make -j16 lab >/dev/null 2>&1 || echo "lab build failed"
    timeout 100 build/gemm_lab --probe --smx --model 8b --type q4_0 2>&1 | tail -40
    synth qwen3-8b
    P="Once upon a time there was a little girl named Lily who liked to play in the garden"
    for v in 0 5 7; do
        echo "== ids POOLED_GPU_SMX=$v"
        POOLED_GPU_SMX=$v timeout 40 "$B" run -m "$M/qwen3-8b.gguf" --backend webgpu -p "$P" \
            -n 6 --temp 0 --ids 2>&1 | tail -2
        echo "== pp512 POOLED_GPU_SMX=$v"
        POOLED_GPU_SMX=$v bench qwen3-8b -p 512 -n 0 -r 3
    done
    echo "== elapsed $(($(date +%s) - t0)) s"
    for p in qwen3.5-27b qwen3.5-35b-a3b; do
        synth $p
        for x in 0 1 2 0; do
            echo "== decode $p POOLED_GPU_XPRE=$x"
            POOLED_GPU_XPRE=$x bench $p -p 0 -n 64 -r 3
        done
        POOLED_GPU_PROFILE=$OUT/prof-$p.txt POOLED_GPU_PROFILE_AT=30 bench $p -p 0 -n 40 -r 1 >/dev/null
    done
    echo "== elapsed $(($(date +%s) - t0)) s"
    for p in qwen3-8b qwen3.5-27b; do
        echo "== verify cost $p"
        bench $p -p 512 -n 0 -r 5 --verify-cost 1,3,7,15
    done
    for kv in f16 q8; do
        echo "== qwen3-8b --kv $kv after 4096"
        bench qwen3-8b -p 4096 -n 64 -r 2 --ctx 8192 --kv $kv
    done
    rm -f "$M/qwen3.5-35b-a3b.gguf"
    echo "== elapsed $(($(date +%s) - t0)) s"
    MODEL=$M/qwen3-8b.gguf bash tools/room_device_bench.sh
    # issue 14: aggregate decode of 1 to 64 streams stepped together, and the time to
    # first id when their 128-id prompts run one after another (docs/serve.md)
    echo "== streams qwen3-8b"
    bench qwen3-8b -p 128 -n 128 -r 1 --streams 1,4,16,64 --ctx 512
    ;;
cpu)
    OUT=$OUT bash tools/cpu_device_bench.sh
    ;;
*)
    echo "usage: tools/device_session.sh gpu|cpu" >&2
    exit 2
    ;;
esac
echo "== elapsed $(($(date +%s) - t0)) s"
rm -rf "$M"
