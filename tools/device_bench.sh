#!/usr/bin/env bash
# device_bench.sh prepare | run CMD... - benchmarks on the H200 machine (device tool) in ONE
# call, without the test tool chain:
#   prepare (here): fill .devbench/ (ignored by git) with the Vulkan loader and GL libraries
#                   NVIDIA's Vulkan driver needs, NNG and libsodium for room/, libmicrohttpd for serve/ (Debian packages)
#                   and the pinned Dawn library
#   run (there, carry [".devbench"]): unpack them, point the Vulkan loader at the NVIDIA driver,
#                   build with make, then run each CMD argument with bash; output goes to
#                   stdout and $OUT/bench.log
# Example: tools/device_bench.sh run 'build/pooled synth --preset qwen3-8b --type q4_0 -o /tmp/m.gguf' \
#              'build/pooled bench -m /tmp/m.gguf --backend webgpu'
set -uo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in
prepare)
    set -e
    ex=$(git rev-parse --git-common-dir)/info/exclude
    grep -qx /.devbench/ "$ex" 2>/dev/null || echo /.devbench/ >>"$ex"
    rm -rf .devbench && mkdir -p .devbench
    (cd .devbench && apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 \
        libgles2 libnng1 libnng-dev libmbedtls14 libmbedx509-1 libmbedcrypto7 libsodium23 \
        libsodium-dev libmicrohttpd12 libmicrohttpd-dev >/dev/null 2>&1)
    xz -T2 -6 -c node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so >.devbench/libwebgpu_wrapper.so.xz
    du -sh .devbench
    ;;
run)
    shift
    OUT=${OUT:-/tmp/device-bench}
    mkdir -p "$OUT" node_modules/bun-webgpu-linux-x64
    for f in .devbench/*.deb; do dpkg -x "$f" /; done
    ldconfig
    xz -dc .devbench/libwebgpu_wrapper.so.xz >node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so
    nv=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    [ -f "$nv" ] && export VK_DRIVER_FILES=$nv
    export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
    {
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
        make -j"$(nproc)" >/dev/null || { echo "device_bench: build failed"; exit 2; }
        for c in "$@"; do
            echo "### $c"
            bash -c "$c" 2>&1
            echo "### exit $?"
        done
    } 2>&1 | tee "$OUT/bench.log"
    ;;
*) echo "usage: tools/device_bench.sh prepare | run CMD..." >&2; exit 2 ;;
esac
