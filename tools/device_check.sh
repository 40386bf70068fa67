#!/usr/bin/env bash
# device_check.sh install|check - the README's test command on the H200 machine (device
# tool; run tools/device_carry.sh here first). Two calls, back to back while it is warm:
#   install  (carry .devtools): unpack clang, gawk, the Vulkan loader and GL libraries into /
#   check    (carry .devdata):  unpack ../shared and Dawn, point the Vulkan loader at the NVIDIA
#            driver, run `tools/setup.sh && make check`; the log goes to $OUT/check.log
set -uo pipefail
OUT=${OUT:-/tmp/device-check}
mkdir -p "$OUT"
case ${1:-} in
install)
    for f in .devtools/*.deb; do dpkg -x "$f" /; done
    ldconfig
    command -v clang >/dev/null || ln -sf /usr/bin/clang-14 /usr/local/bin/clang
    clang --version | head -n 1
    ;;
check)
    command -v clang >/dev/null || { echo "device_check: run 'install' first (machine went cold?)"; exit 2; }
    mkdir -p ../shared node_modules/bun-webgpu-linux-x64
    xz -dc .devdata/shared.tar.xz | tar -C ../shared -xf -
    xz -dc .devdata/libwebgpu_wrapper.so.xz >node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so
    nv=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    [ -f "$nv" ] && export VK_DRIVER_FILES=$nv
    export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
    # the arm64 cross compiler and qemu-user (about 50 MB of packages) are not carried: setup
    # skips them and `make check` says the arm64 tests were not run
    export POOLED_NO_CROSS=1
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$OUT/check.log"
    (tools/setup.sh && make -j"$(nproc)" check) >>"$OUT/check.log" 2>&1
    rc=$?
    echo "device_check: exit $rc" | tee -a "$OUT/check.log"
    exit "$rc"
    ;;
*) echo "usage: tools/device_check.sh install|check" >&2; exit 2 ;;
esac
