#!/usr/bin/env bash
# gpu_device_q8.sh - the H200 run of the quantised-activation GEMVs (device tool, repo root,
# build/ node_modules/ .gl/ carried; see docs/gpu-notes.md): synthesise the four qwen3
# models, print the autotune table, then bench each with --act q8 and --act f32 side by
# side in this one call, and profile the 8B Q4_0 step. Results in $OUT.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_RUNTIME_DIR=/tmp
rm -rf "$HOME/.cache/pooled"
R=$OUT/results.txt
mkdir -p /tmp/m
t0=$(date +%s)
MODELS=${MODELS:-"qwen3-8b-q4_0 qwen3-1.7b-q4_0 qwen3-8b-q8_0 qwen3-1.7b-q8_0"}
for m in $MODELS; do
    p=${m%-*}; t=${m##*-}
    build/pooled synth --preset "$p" --type "$t" -o "/tmp/m/$m.gguf" --threads 16 >/dev/null 2>&1 &
done
wait
echo "synth $(($(date +%s) - t0)) s" >>"$R"
b() {
    echo "== $*" >>"$R"
    build/pooled bench -m "/tmp/m/$1.gguf" --backend webgpu -p 16 -n 128 -r 5 "${@:2}" 2>&1 |
        grep -E "decode|prefill|weights|pooled:|error" >>"$R"
}
for m in ${TUNE_MODELS-$MODELS}; do
    POOLED_GPU_TUNE=verbose build/pooled bench -m "/tmp/m/$m.gguf" --backend webgpu -p 0 -n 4 -r 1 \
        >/dev/null 2>>"$OUT/tune.txt"
done
for m in $MODELS; do b "$m" --act q8; b "$m" --act f32; done
for m in qwen3-8b-q4_0 qwen3-1.7b-q4_0; do b "$m" --act q8; done
POOLED_GPU_PROFILE=$OUT/profile-8b-q4_0.txt POOLED_GPU_PROFILE_AT=60 build/pooled bench \
    -m /tmp/m/qwen3-8b-q4_0.gguf --backend webgpu -p 0 -n 100 -r 1 >/dev/null 2>&1
echo "total $(($(date +%s) - t0)) s" >>"$R"
cat "$R"
