#!/usr/bin/env bash
# api_only_test.sh - the pooled command's subcommands that issue 14 puts on the public API
# call into libpooled only through it: each object below may use the pooled_* functions of
# include/pooled.h and the utilities of src/base/ (JSON, strings, files), and no other symbol
# libpooled.a defines. The room (cmd_room.c: its host appends its workers' stages to the
# chain through src/api/api_internal.h) is not on the list.
. "$(dirname "$0")/lib.sh"
B=$(dirname "$POOLED")
LIB=$B/libpooled.a
ON_API="cmd/pooled/main cmd/pooled/args cmd/pooled/model_args cmd/pooled/cmd_run
        cmd/pooled/cmd_chat cmd/pooled/cmd_serve cmd/pooled/cmd_template cmd/pooled/cmd_tokenize
        cmd/pooled/cmd_info cmd/pooled/cmd_quantize cmd/pooled/cmd_synth cmd/pooled/cmd_room_chat
        cmd/pooled/cmd_bench cmd/pooled/bench_streams
        serve/api serve/engine serve/metrics serve/origin serve/page serve/request
        serve/responses serve/server serve/tool_force serve/tool_parse"
check "libpooled.a exists" test -f "$LIB"
# the archive's members from src/base/ (members are named by their file's base name)
for f in src/base/*.c; do basename "${f%.c}.o"; done | sort >"$TMP/base"
# every symbol libpooled.a defines outside src/base/, but the public pooled_* ones
nm --defined-only -A "$LIB" 2>/dev/null |
    awk '$(NF-1) ~ /^[TDBRSVW]$/ { n = split($1, a, ":"); print a[n - 1], $NF }' >"$TMP/defs"
awk 'NR == FNR { base[$1] = 1; next } !($1 in base) && $2 !~ /^pooled_/ { print $2 }' \
    "$TMP/base" "$TMP/defs" | sort -u >"$TMP/internal"
check "libpooled.a defines internal symbols (the list is not empty)" test -s "$TMP/internal"
check "pl_gguf_open is one of them" grep -qx pl_gguf_open "$TMP/internal"
for o in $ON_API; do
    obj=$B/obj/$o.o
    if [ ! -f "$obj" ]; then fail "$obj: missing (renamed? keep this list true)"; continue; fi
    used=$(nm -u "$obj" | awk '{ print $2 }' | grep -xFf "$TMP/internal" | tr '\n' ' ')
    if [ -z "$used" ]; then pass; else fail "$o uses libpooled's internals, not pooled.h: $used"; fi
done
finish
