#!/usr/bin/env bash
# serve_bench.sh -m FILE [--streams "1 4 16"] [-n 128] [--prompt-bytes 512] [serve options...]
# Aggregate decode speed of `pooled serve` with 1, 4, 16 (...) concurrent greedy streams:
# starts the server on a free local port with --parallel as large as the most streams
# (and a queue to match), runs tools/serve_bench.mjs against it (node, plain fetch), stops
# it. A benchmark, not a test (docs/serve.md has the numbers). Extra options go to
# `pooled serve` (--backend, -t, --ctx, ...). Example on the H200:
#   build/pooled synth --preset qwen3-8b --type q4_0 -o /tmp/q8b.gguf
#   tools/serve_bench.sh -m /tmp/q8b.gguf --streams "1 4 16 64" --backend webgpu
set -euo pipefail
POOLED=${POOLED_BIN:-build/pooled}
model= streams="1 4 16" n=128 pbytes=512 extra=()
while [ $# -gt 0 ]; do
    case $1 in
    -m) model=$2; shift 2 ;;
    --streams) streams=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    --prompt-bytes) pbytes=$2; shift 2 ;;
    *) extra+=("$1"); shift ;;
    esac
done
[ -n "$model" ] || { echo "serve_bench.sh: give the model with -m FILE" >&2; exit 1; }
most=1
for c in $streams; do [ "$c" -gt "$most" ] && most=$c; done
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
"$POOLED" serve -m "$model" --host 127.0.0.1 --port 0 --parallel "$most" --queue "$most" \
    "${extra[@]}" >"$tmp/out" 2>"$tmp/err" &
pid=$!
url=
for _ in $(seq 600); do
    url=$(sed -n 's/^pooled serve: listening on //p' "$tmp/out")
    [ -n "$url" ] && break
    kill -0 $pid 2>/dev/null || { cat "$tmp/err" >&2; exit 1; }
    sleep 0.1
done
[ -n "$url" ] || { echo "serve_bench.sh: the server did not come up" >&2; exit 1; }
grep -m1 '^loaded' "$tmp/err" >&2 || true
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores" >&2
URL=$url STREAMS=$streams MAX_TOKENS=$n PROMPT_BYTES=$pbytes node "$(dirname "$0")/serve_bench.mjs"
