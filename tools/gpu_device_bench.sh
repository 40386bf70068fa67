#!/usr/bin/env bash
# gpu_device_bench.sh - the H200 measurement recipe, run through the device tool from the
# repo root with the binary, the Dawn library and the loader .debs carried (BIN, POOLED_DAWN
# and GL say where; defaults: build/pooled, node_modules/..., .gl; see docs/gpu-notes.md):
# Vulkan loader from the .debs, synthetic qwen3 models written there by our own `pooled
# synth`, then `pooled bench --backend webgpu` on each, per-op profiles, the autotune table,
# and A/B runs (fusion off, extra Dawn toggles). Results land in $OUT, in few files (the
# device tool brings back at most 8).
set -u
OUT=${OUT:-/tmp/gpu-bench}
BIN=${BIN:-build/pooled}
GL=${GL:-.gl}
MODELS=${MODELS:-"qwen3-1.7b:q4_0 qwen3-1.7b:q8_0 qwen3-8b:q4_0 qwen3-8b:q8_0"}
PROFILE=${PROFILE:-"qwen3-1.7b:q4_0 qwen3-8b:q4_0"}
AB=${AB:-"qwen3-1.7b:q4_0 qwen3-8b:q4_0"}
mkdir -p "$OUT" /tmp/models
for f in "$GL"/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_RUNTIME_DIR=/tmp
R=$OUT/results.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.memory --format=csv >>"$R" 2>&1
t0=$(date +%s)
for m in $MODELS; do
    p=${m%%:*}; t=${m##*:}
    "$BIN" synth --preset "$p" --type "$t" -o "/tmp/models/$p-$t.gguf" --threads 16 >/dev/null 2>&1
done
echo "synth $(( $(date +%s) - t0 )) s" >>"$R"
# the autotune table (re-tuned, every candidate printed)
POOLED_GPU_TUNE=verbose "$BIN" bench -m "/tmp/models/qwen3-1.7b-q4_0.gguf" \
    --backend webgpu -p 0 -n 8 -r 1 >/dev/null 2>"$OUT/tune.txt"
bench() { # NAME MODEL [env...]: one bench line per run
    local name=$1 model=$2; shift 2
    echo "== $name" >>"$R"
    env "$@" "$BIN" bench -m "/tmp/models/$model.gguf" --backend webgpu -p 16 -n 128 -r 3 \
        2>&1 | grep -E "decode|prefill|weights|pooled:" >>"$R"
}
for m in $MODELS; do bench "${m/:/-}" "${m/:/-}" X=1; done
for m in $AB; do
    bench "${m/:/-} fusion off" "${m/:/-}" POOLED_GPU_FUSE=0
    bench "${m/:/-} skip_validation" "${m/:/-}" POOLED_GPU_TOGGLES=skip_validation
done
for m in $PROFILE; do
    POOLED_GPU_PROFILE="$OUT/profile-${m/:/-}.txt" POOLED_GPU_PROFILE_AT=60 \
        "$BIN" bench -m "/tmp/models/${m/:/-}.gguf" --backend webgpu -p 0 -n 100 -r 1 >/dev/null 2>&1
done
echo "total $(( $(date +%s) - t0 )) s" >>"$R"
