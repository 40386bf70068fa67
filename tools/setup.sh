#!/usr/bin/env bash
# setup.sh - install everything pooled needs to build and test on Debian 12 (run as root,
# or with sudo available). Safe to run again: it skips what is already there.
#   apt: compiler, clang (libFuzzer + sanitizers), jq (e2e tests read JSON), Mesa 25 lavapipe from bookworm-backports
#   npm: the pinned Dawn build (package.json / package-lock.json) for the WebGPU backend
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo

need_apt=()
for p in build-essential clang libclang-rt-14-dev make gawk jq; do
    dpkg -s "$p" >/dev/null 2>&1 || need_apt+=("$p")
done
if [ ${#need_apt[@]} -gt 0 ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
# WebGPU on CPU machines: Debian 12's own lavapipe (Mesa 22.3) is rejected by the pinned Dawn,
# Mesa 25 from bookworm-backports works (see ../shared/docs/webgpu-native.md).
if ! dpkg -s mesa-vulkan-drivers 2>/dev/null | grep -q '^Version: 25'; then
    if ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
        echo "deb http://deb.debian.org/debian bookworm-backports main" |
            $SUDO tee /etc/apt/sources.list.d/bookworm-backports.list >/dev/null
    fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq -t bookworm-backports \
        mesa-vulkan-drivers libvulkan1 >/dev/null
fi

# The Dawn build the GPU backend dlopens, pinned by package.json / package-lock.json.
if [ ! -f node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so ]; then
    if ! command -v npm >/dev/null; then
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq npm >/dev/null
    fi
    npm ci --no-audit --no-fund >/dev/null
fi
echo "setup: done"
