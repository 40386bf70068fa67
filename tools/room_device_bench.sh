#!/usr/bin/env bash
# room_device_bench.sh [--27b] - one process against a room on one machine: `pooled bench`
# and then `pooled room bench` (host + WORKERS workers on 127.0.0.1, every process on the
# same device, the layers split in equal contiguous ranges: the host the first, each worker
# the next with --layers), on the same model and options; prints both and the ratios
# room / one process of prefill, decode and time to first token, and beside them one
# process over a chain of as many local stages (`bench --split`, the host holding the ends
# only): what the chain costs without the wire and the second process.
# On the H200 machine, after the build of tools/device_bench.sh:
#     tools/device_bench.sh run 'bash tools/room_device_bench.sh'
# synthesises qwen3-8b Q4_0 (and qwen3.5-27b Q4_0 with --27b) into /tmp and measures each
# with --backend webgpu. Elsewhere (the numbers of the README's room section, tests), set:
#   MODEL=FILE      measure this file instead (no synth)
#   BACKEND=cpu     backend of every process (default webgpu)
#   ARGS="..."      bench options of both (default "-p 512 -n 128 -r 3")
#   WORKERS=N       workers beside the host (default 1)
#   LATENCY=MS      --emulate-latency-ms of every room member (default 0)
#   THREADS=N       -t of every process (default: the backend's choice)
#   BIN=build/pooled, TMPDIR (default /tmp: a temporary folder there holds the synthesised
#                   models and is removed at the end)
#   POOLED_ROOM_FRAME=N  the room's prompt frames of at most N columns (default 512: the
#                   whole -p 512 prompt in one frame; 16 was the old size), for the A/B
# Exit status: 0 when every measurement ran, else 1 with one line saying which failed.
set -u
BIN=${BIN:-build/pooled}
BACKEND=${BACKEND:-webgpu}
ARGS=${ARGS:-"-p 512 -n 128 -r 3"}
WORKERS=${WORKERS:-1}
LATENCY=${LATENCY:-0}
DIR=${TMPDIR:-/tmp}
PRESETS="qwen3-8b"
[ "${1:-}" = --27b ] && PRESETS="qwen3-8b qwen3.5-27b"
[ $# -gt 0 ] && [ "$1" != --27b ] && { echo "usage: $0 [--27b]" >&2; exit 2; }
T=${THREADS:+-t $THREADS}
WORK=$(mktemp -d "$DIR/room-bench.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT
export XDG_CACHE_HOME=$WORK/cache # tensor hashes: nothing left in the user's cache

# field NAME < JSON: one number of bench's --json line
field() { grep -o "\"$1\":[-0-9.e+]*" | head -n 1 | cut -d: -f2; }

# measure MODEL LABEL: one process, then the room; prints a few lines
measure() {
    local m=$1 label=$2 L n k host addr i rc pids=()
    L=$("$BIN" info "$m" 2>/dev/null | awk '$1 ~ /\.block_count$/ { print $3; exit }')
    n=$((WORKERS + 1))
    [ -n "$L" ] && [ "$L" -ge "$n" ] || { echo "room_device_bench: $m: cannot split its ${L:-?} layers in $n" >&2; return 1; }
    # one process
    "$BIN" bench -m "$m" --backend "$BACKEND" $T $ARGS --json >"$WORK/one.json" 2>"$WORK/one.err" ||
        { echo "room_device_bench: pooled bench failed: $(tail -n 1 "$WORK/one.err")" >&2; return 1; }
    # one process over a chain of as many stages (bench --split): the room's passes without
    # the wire or a second process, to tell the chain's own cost from the hand-overs
    "$BIN" bench -m "$m" --backend "$BACKEND" $T $ARGS --split "$n" --json >"$WORK/split.json" \
        2>"$WORK/split.err" ||
        { echo "room_device_bench: pooled bench --split failed: $(tail -n 1 "$WORK/split.err")" >&2; return 1; }
    # the room: layer ranges [b_i, b_{i+1}) with b_i = i * L / n
    local b=() lat=()
    for i in $(seq 0 "$n"); do b+=($((i * L / n))); done
    [ "$LATENCY" != 0 ] && lat=(--emulate-latency-ms "$LATENCY")
    "$BIN" room bench -m "$m" --backend "$BACKEND" $T --listen 127.0.0.1:0 --key room-bench \
        --workers "$WORKERS" --wait 300000 --host-layers "${b[0]}-${b[1]}" "${lat[@]}" $ARGS \
        --json >"$WORK/room.json" 2>"$WORK/host.err" &
    host=$!
    for i in $(seq 600); do
        addr=$(grep -o "room join [^ ]*" "$WORK/host.err" 2>/dev/null | cut -d' ' -f3)
        [ -n "$addr" ] || ! kill -0 $host 2>/dev/null && break
        sleep 0.1
    done
    for k in $(seq "$WORKERS"); do
        [ -n "$addr" ] || break
        "$BIN" room join "$addr" --key room-bench -m "$m" --backend "$BACKEND" $T \
            --layers "${b[k]}-${b[k + 1]}" "${lat[@]}" 2>"$WORK/w$k.err" &
        pids+=($!)
    done
    wait $host
    rc=$?
    for k in "${pids[@]}"; do wait "$k"; done
    [ $rc -eq 0 ] || { echo "room_device_bench: room bench failed: $(tail -n 1 "$WORK/host.err")" >&2; return 1; }
    echo "== $label ($BACKEND, $ARGS, host + $WORKERS worker(s), layers $(IFS=,; echo "${b[*]}"), latency $LATENCY ms)"
    local f one room split
    for f in prefill_tok_s decode_tok_s ttft_ms; do
        one=$(field $f <"$WORK/one.json")
        room=$(field $f <"$WORK/room.json")
        split=$(field $f <"$WORK/split.json")
        awk -v f=$f -v a="$one" -v b="$room" -v c="$split" 'BEGIN {
            r = a > 0 ? b / a : 0; q = a > 0 ? c / a : 0
            printf "%-14s one process %10.2f   room %10.2f   room/one %.3f   split %10.2f   split/one %.3f\n", f, a, b, r, c, q }'
    done
}

rc=0
if [ -n "${MODEL:-}" ]; then
    measure "$MODEL" "$(basename "$MODEL")" || rc=1
else
    for p in $PRESETS; do
        m=$WORK/$p-q4_0.gguf
        t0=$(date +%s)
        "$BIN" synth --preset "$p" --type q4_0 -o "$m" --threads "$(nproc)" >/dev/null 2>"$WORK/synth.err" ||
            { echo "room_device_bench: synth $p failed: $(tail -n 1 "$WORK/synth.err")" >&2; rc=1; continue; }
        echo "(synth $p q4_0: $(($(date +%s) - t0)) s)"
        measure "$m" "$p q4_0" || rc=1
        rm -f "$m"
    done
fi
exit $rc
