#!/usr/bin/env bash
# setup.sh - install everything pooled needs to build and test on Debian 12 (run as root,
# or with sudo available). Safe to run again: it checks what works and installs only what is
# missing, so on a machine that already has everything (or cannot reach a package registry
# but was given the tools another way) it installs nothing.
#   apt: compiler, clang (libFuzzer + sanitizers), jq (e2e tests read JSON), curl (the serve
#        test's raw HTTP), pkg-config (the install test), NNG and libsodium
#        (the room's link layer), libmicrohttpd (`pooled serve`'s HTTP), Mesa 25 lavapipe
#        from bookworm-backports when the machine has no usable Vulkan driver
#        chromium (the chat page's test in a headless browser)
#        the arm64 cross compiler, its libc and qemu-user (`make cross-arm64`, in `make check`)
#   npm: the pinned Dawn build (package.json / package-lock.json) for the WebGPU backend, and
#        the OpenAI and Anthropic client libraries the serve tests drive the server with, and
#        playwright-core (drives chromium; it downloads no browser of its own)
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
apt_updated=0
apt_install() { # apt_install [-t SUITE] PACKAGE...
    [ $apt_updated = 1 ] || $SUDO apt-get update -qq
    apt_updated=1
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

# The line for bookworm-backports, derived from the Debian archive this machine already uses
# (its mirror and keyring), never a mirror address of our own.
backports_source() {
    local f
    # one-line sources: "deb [options] URI bookworm components"
    f=$({ grep -hsE '^[[:space:]]*deb[[:space:]]' $APT_ETC/sources.list $APT_ETC/sources.list.d/*.list || true; } |
        awk '{ i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
               if ($(i + 1) == "bookworm") { o = ""; for (j = 2; j < i; j++) o = o " " $j;
                                             print "deb" o " " $i " bookworm-backports main"; exit } }')
    if [ -n "$f" ]; then echo "list:$f"; return; fi
    # deb822 sources: a paragraph whose Suites include bookworm
    f=$(awk 'BEGIN { RS = ""; FS = "\n" }
             { u = ""; s = ""; k = ""
               for (i = 1; i <= NF; i++) {
                   if ($i ~ /^URIs:/) { u = $i; sub(/^URIs:[ \t]*/, "", u); sub(/[ \t].*/, "", u) }
                   if ($i ~ /^Suites:/) s = " " $i " "
                   if ($i ~ /^Signed-By:/) k = $i }
               if (u != "" && s ~ /[ \t]bookworm[ \t]/) {
                   print "Types: deb\nURIs: " u "\nSuites: bookworm-backports\nComponents: main"
                   if (k != "") print k
                   exit } }' $APT_ETC/sources.list.d/*.sources 2>/dev/null || true)
    if [ -n "$f" ]; then echo "sources:$f"; return; fi
    return 1
}

# `setup.sh --backports-entry` prints the entry it would add and exits (APT_ETC: where the
# sources are; tests point it at sample files).
APT_ETC=${APT_ETC:-/etc/apt}
if [ "${1:-}" = --backports-entry ]; then backports_source; exit; fi

# Tools, checked by what they do rather than by package name.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
need=()
command -v cc >/dev/null && command -v make >/dev/null || need+=(build-essential make)
command -v gawk >/dev/null || need+=(gawk)
command -v jq >/dev/null || need+=(jq)
command -v curl >/dev/null || need+=(curl)
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d && n; }' \
    >"$scratch/f.c"
clang -fsanitize=fuzzer,address,undefined "$scratch/f.c" -o "$scratch/f" 2>/dev/null ||
    need+=(clang libclang-rt-14-dev)
echo 'int main(void) { return 0; }' >"$scratch/m.c"
cc -fsanitize=address,undefined "$scratch/m.c" -o "$scratch/m" 2>/dev/null || need+=(build-essential)
# The room's link layer (room/): NNG for transports, libsodium for the key proof and AEAD.
printf '%s\n' '#include <nng/nng.h>' '#include <sodium.h>' \
    'int main(void) { nng_stream_listener *l; return sodium_init() < 0 ||' \
    '    nng_stream_listener_alloc(&l, "tcp://127.0.0.1:0") != 0; }' >"$scratch/room.c"
cc "$scratch/room.c" -o "$scratch/room" -lnng -lsodium 2>/dev/null && "$scratch/room" ||
    need+=(libnng-dev libsodium-dev)
# `pooled serve`'s HTTP server (serve/): libmicrohttpd.
printf '%s\n' '#include <microhttpd.h>' \
    'int main(void) { return MHD_is_feature_supported(MHD_FEATURE_THREADS) != MHD_YES; }' \
    >"$scratch/mhd.c"
cc "$scratch/mhd.c" -o "$scratch/mhd" -lmicrohttpd 2>/dev/null && "$scratch/mhd" ||
    need+=(libmicrohttpd-dev)
# pkg-config: the install test builds examples/ against the installed pooled.pc.
printf 'Name: t\nDescription: t\nVersion: 1\nCflags: -DT_OK\n' >"$scratch/t.pc"
[ "$(PKG_CONFIG_PATH=$scratch pkg-config --cflags t 2>/dev/null)" = "-DT_OK" ] || need+=(pkg-config)
# wasm32 (make wasm-test): clang's wasm32-wasi target needs Debian's wasi-libc, the compiler
# builtins for wasm32 and wasm-ld (lld); node, which runs the modules, comes with npm below.
printf '%s\n' '#include <stdio.h>' '#include <wasm_simd128.h>' \
    'int main(void) { return wasm_i32x4_extract_lane(wasm_i32x4_splat(printf("ok")), 0) != 2; }' \
    >"$scratch/w.c"
clang --target=wasm32-wasi -msimd128 -O2 "$scratch/w.c" -o "$scratch/w.wasm" 2>/dev/null ||
    need+=(wasi-libc libclang-rt-14-dev-wasm32 lld)
# The arm64 cross build (`make cross-arm64`): a program that cross-compiles and runs under
# qemu-aarch64 with the arm64 glibc (not wanted where POOLED_NO_CROSS is set).
[ -n "${POOLED_NO_CROSS:-}" ] ||
    { aarch64-linux-gnu-gcc "$scratch/m.c" -o "$scratch/m64" 2>/dev/null &&
        qemu-aarch64 -L /usr/aarch64-linux-gnu "$scratch/m64"; } ||
    need+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
[ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"
# A headless browser for the chat page's test: Debian's chromium, if it renders a page
# (without the recommended extras: about 45 s to install).
chromium --headless --no-sandbox --disable-gpu --dump-dom 'data:text/html,<p>ok</p>' 2>/dev/null |
    grep -q '<p>ok</p>' || apt_install --no-install-recommends chromium

# WebGPU on machines without a GPU: Debian 12's own lavapipe (Mesa 22.3) is rejected by the
# pinned Dawn, Mesa 25 from bookworm-backports works (see ../shared/docs/webgpu-native.md).
# A machine with another Vulkan driver (a GPU vendor's, or one named by VK_DRIVER_FILES) keeps it.
vulkan_usable() {
    ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1' || return 1
    if dpkg -s mesa-vulkan-drivers >/dev/null 2>&1; then
        dpkg -s mesa-vulkan-drivers | grep -qE '^Version: (2[5-9]|[3-9][0-9])' || return 1
    fi
    [ -n "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] && return 0
    ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json \
        /usr/local/share/vulkan/icd.d/*.json >/dev/null 2>&1
}
if ! vulkan_usable; then
    if ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
        src=$(backports_source) || {
            echo "setup: no Debian bookworm archive in the apt sources; add bookworm-backports" \
                "and run again" >&2
            exit 1
        }
        case $src in
        list:*) echo "${src#list:}" | $SUDO tee /etc/apt/sources.list.d/bookworm-backports.list >/dev/null ;;
        sources:*) echo "${src#sources:}" |
            $SUDO tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null ;;
        esac
        apt_updated=0
    fi
    apt_install -t bookworm-backports mesa-vulkan-drivers libvulkan1
fi

# The Dawn build the GPU backend dlopens and the client libraries of the serve tests, pinned
# by package.json / package-lock.json.
if [ ! -f node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so ] ||
    ! node -e 'require("openai"); require("@anthropic-ai/sdk"); require("playwright-core")' 2>/dev/null; then
    command -v npm >/dev/null || apt_install npm
    npm ci --no-audit --no-fund >/dev/null
fi
echo "setup: done"
