#!/usr/bin/env bash
# gpu_device_shapes.sh - decode speed of fixed GEMV shapes (POOLED_GPU_GEMV) on the H200:
# the real step streams every weight from memory once, which a kernel replayed alone (warm
# in the 50 MB L2) does not show. Device tool, repo root, build/ node_modules/ .gl/ carried.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_RUNTIME_DIR=/tmp
rm -rf "$HOME/.cache/pooled"
R=$OUT/shapes.txt
mkdir -p /tmp/m
MODELS=${MODELS:-"qwen3-8b-q4_0 qwen3-8b-q8_0 qwen3-1.7b-q4_0 qwen3-1.7b-q8_0"}
for m in $MODELS; do
    p=${m%-*}; t=${m##*-}
    [ -f "/tmp/m/$m.gguf" ] || build/pooled synth --preset "$p" --type "$t" -o "/tmp/m/$m.gguf" --threads 16 >/dev/null 2>&1 &
done
wait
for m in $MODELS; do
    for s in ${SHAPES:-64,4 64,8 128,8 32,8 128,4 64,16 128,16 256,8}; do
        r=$(POOLED_GPU_GEMV="$s,0,0,1" build/pooled bench -m "/tmp/m/$m.gguf" --backend webgpu -p 0 -n 128 \
            -r 3 --act ${ACT:-q8} 2>&1 | grep -E "decode|pooled:")
        echo "$m $s $r" >>"$R"
    done
done
cat "$R"
