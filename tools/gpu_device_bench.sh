#!/usr/bin/env bash
# gpu_device_bench.sh - the H200 measurement recipe, run through the device tool from the
# repo root with build/, node_modules/ and .gl/ carried (see docs/gpu-notes.md):
# Vulkan loader from .gl/*.deb, synthetic qwen3 models written there by our own `pooled
# synth`, then `pooled bench --backend webgpu` on each, a per-op profile, and the autotune
# table. Everything lands in $OUT (the device tool brings it back).
set -u
OUT=${OUT:-/tmp/gpu-bench}
MODELS=${MODELS:-"qwen3-1.7b:q4_0 qwen3-1.7b:q8_0 qwen3-8b:q4_0 qwen3-8b:q8_0"}
PROFILE=${PROFILE:-"qwen3-1.7b:q4_0 qwen3-8b:q4_0"}
mkdir -p "$OUT" /tmp/models
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_RUNTIME_DIR=/tmp
nvidia-smi --query-gpu=name,driver_version,clocks.max.memory --format=csv >"$OUT/gpu.txt" 2>&1
t0=$(date +%s)
for m in $MODELS; do
    p=${m%%:*}; t=${m##*:}
    build/pooled synth --preset "$p" --type "$t" -o "/tmp/models/$p-$t.gguf" --threads 16 \
        >>"$OUT/synth.txt" 2>&1
done
echo "synth $(( $(date +%s) - t0 )) s" >>"$OUT/timing.txt"
# the autotune table once (re-tuned, every candidate printed)
POOLED_GPU_TUNE=verbose build/pooled bench -m "/tmp/models/qwen3-1.7b-q4_0.gguf" \
    --backend webgpu -p 0 -n 8 -r 1 >"$OUT/tune-run.txt" 2>"$OUT/tune.txt"
for m in $MODELS; do
    p=${m%%:*}; t=${m##*:}
    t1=$(date +%s)
    build/pooled bench -m "/tmp/models/$p-$t.gguf" --backend webgpu -p 16 -n 128 -r 3 --json \
        >"$OUT/bench-$p-$t.txt" 2>&1
    echo "bench $p $t $(( $(date +%s) - t1 )) s" >>"$OUT/timing.txt"
done
for m in $PROFILE; do
    p=${m%%:*}; t=${m##*:}
    POOLED_GPU_PROFILE="$OUT/profile-$p-$t.txt" POOLED_GPU_PROFILE_AT=60 \
        build/pooled bench -m "/tmp/models/$p-$t.gguf" --backend webgpu -p 0 -n 100 -r 1 \
        >>"$OUT/profile-runs.txt" 2>&1
done
# one kernel per op, for the fusion's share
POOLED_GPU_FUSE=0 build/pooled bench -m "/tmp/models/qwen3-1.7b-q4_0.gguf" --backend webgpu \
    -p 0 -n 128 -r 3 >"$OUT/bench-qwen3-1.7b-q4_0-nofuse.txt" 2>&1
cp -r ~/.cache/pooled "$OUT/cache" 2>/dev/null
echo "total $(( $(date +%s) - t0 )) s" >>"$OUT/timing.txt"
