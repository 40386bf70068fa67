#!/usr/bin/env bash
# device_carry.sh - here, before the device calls of tools/device_check.sh: fill two folders
# (ignored by git) with what the H200 machine lacks and cannot download (it reaches no
# package registry). The device tool carries at most 64 MiB a call, so they travel in two
# calls, back to back while the machine is warm:
#   .devtools/  clang 14 with libFuzzer and the sanitizer runtimes, gawk, the Vulkan loader
#               and the GL dispatch libraries NVIDIA's Vulkan driver needs, NNG (with the mbed
#               TLS libraries it links) and libsodium for room/, pkg-config for the install
#               test (Debian packages)
#   .devdata/   ../shared's models and fixtures, and the pinned Dawn library (xz)
set -euo pipefail
cd "$(dirname "$0")/.."
ex=$(git rev-parse --git-common-dir)/info/exclude
for d in /.devtools/ /.devdata/; do grep -qx "$d" "$ex" 2>/dev/null || echo "$d" >>"$ex"; done
rm -rf .devtools .devdata
mkdir -p .devtools .devdata
(cd .devtools && apt-get download clang-14 libclang-cpp14 libllvm14 libclang-common-14-dev \
    libclang-rt-14-dev libz3-4 gawk libsigsegv2 libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 \
    libglx0 libgles2 libnng1 libnng-dev libmbedtls14 libmbedx509-1 libmbedcrypto7 libsodium23 \
    libsodium-dev pkg-config pkgconf pkgconf-bin libpkgconf3 >/dev/null 2>&1)
xz -T2 -6 -c node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so >.devdata/libwebgpu_wrapper.so.xz
tar -C "${POOLED_SHARED:-../shared}" -cf - models fixtures | xz -T2 -3 >.devdata/shared.tar.xz
du -sh .devtools .devdata
