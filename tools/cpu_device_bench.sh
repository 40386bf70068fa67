#!/usr/bin/env bash
# cpu_device_bench.sh - the CPU side by side with llama.cpp on the H200 machine's cores (issue
# 15), in one device call after tools/device_bench.sh has built pooled there:
#   tools/device_bench.sh run 'tools/cpu_device_bench.sh'     (carry [".devbench"])
# It unpacks llama.cpp b10573's CPU tools into /tmp, synthesises qwen3-0.6b and qwen3-1.7b in
# Q4_0, Q8_0 (pooled synth) and Q4_K_M (pooled synth f16, then pooled quantize q4_k_m: the
# llama-quantize mixture, Q4_K with Q6_K where it puts it), then for each file alternates
# `pooled bench --backend cpu` and `llama-bench` at THREADS (default 16), -p 512 -n 128 -r 3,
# ROUNDS times (default 1), and prints one table (tok/s, decode GB/s of weights), then the
# thread pool's hand-over cost and the memory read bandwidth (build/pool_lab).
# The llama.cpp tarball: $LLAMA_TAR, or ../shared/tools/, shared/tools/ or .devbench/ (copy
# it there before the call where the device machine has no ../shared:
#   cp ../shared/tools/llama.cpp-b10573-cpu.tar.xz .devbench/).
# Takes about 3-5 minutes on 16 cores. Output: stdout and $OUT/cpu-bench.txt.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cpu-bench}
THREADS=${THREADS:-16}
ROUNDS=${ROUNDS:-1}
PRESETS=${PRESETS:-"qwen3-0.6b qwen3-1.7b"}
TYPES=${TYPES:-"q4_0 q8_0 q4_k_m"}
ARGS=${ARGS:-"-p 512 -n 128 -r 3"}
BIN=${BIN:-build/pooled}
SYNTH_ARGS=${SYNTH_ARGS:-} # e.g. "--layers 2 --vocab 4096" for a quick trial of the script
TAR=llama.cpp-b10573-cpu.tar.xz
M=/tmp/cpu-bench-models
mkdir -p "$OUT" "$M" /tmp/ll
R=$OUT/cpu-bench.txt
: >"$R"
say() { echo "$*" | tee -a "$R"; }

tar_path=""
for t in "${LLAMA_TAR:-}" "../shared/tools/$TAR" "shared/tools/$TAR" ".devbench/$TAR"; do
    [ -n "$t" ] && [ -f "$t" ] && { tar_path=$t; break; }
done
[ -n "$tar_path" ] || { say "cpu_device_bench: no $TAR (set LLAMA_TAR or copy it into .devbench/)"; exit 2; }
tar xJf "$tar_path" -C /tmp/ll || { say "cpu_device_bench: cannot unpack $tar_path"; exit 2; }
LB=/tmp/ll/llama.cpp-b10573-cpu/llama-bench
[ -x "$BIN" ] || { say "cpu_device_bench: no $BIN (build first: tools/device_bench.sh run ...)"; exit 2; }
make -s build/pool_lab >/dev/null 2>&1 || say "cpu_device_bench: build/pool_lab did not build"

say "$(lscpu | grep -E '^Model name|^CPU\(s\)')"
say "x86 features: $(grep -o -w -E 'avx2|fma|f16c|avx512f|avx512_vnni|avx_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ')"
say "load: $(cut -d' ' -f1-3 /proc/loadavg), threads $THREADS, $ARGS, rounds $ROUNDS"
t0=$(date +%s)
# (pooled quantize works on one core: the presets' Q4_K_M files are made side by side)
for p in $PRESETS; do
    for t in $TYPES; do
        f=$M/$p-$t.gguf
        if [ "$t" = q4_k_m ]; then
            "$BIN" synth --preset "$p" $SYNTH_ARGS --type f16 -o "$M/$p-f16.gguf" --threads "$THREADS" >/dev/null 2>&1
            ("$BIN" quantize "$M/$p-f16.gguf" "$f" q4_k_m >/dev/null 2>&1; rm -f "$M/$p-f16.gguf") &
        else
            "$BIN" synth --preset "$p" $SYNTH_ARGS --type "$t" -o "$f" --threads "$THREADS" >/dev/null 2>&1
        fi
    done
done
wait
for p in $PRESETS; do for t in $TYPES; do
    [ -f "$M/$p-$t.gguf" ] || say "cpu_device_bench: could not make $M/$p-$t.gguf"
done; done
say "models made in $(($(date +%s) - t0)) s"

# pooled bench: "prefill pp512 X tok/s", "decode tg128 Y tok/s", "... Z GB/s in decode"
pooled_run() {
    "$BIN" bench -m "$1" --backend cpu -t "$THREADS" $ARGS 2>&1 |
        awk '/^prefill/ {pp=$3} /^decode/ {tg=$3} /GB\/s in decode/ {for (i=1;i<=NF;i++) if ($i=="GB/s") gb=$(i-1)}
             END {printf "%s %s %s", pp ? pp : "-", tg ? tg : "-", gb ? gb : "-"}'
}
# llama-bench -o csv (no field holds a comma): the avg_ts of the n_prompt > 0 row and of the n_gen > 0 row
llama_run() {
    "$LB" -m "$1" -t "$THREADS" $ARGS -o csv 2>/dev/null |
        awk -F, '{gsub(/"/, "")} NR == 1 {for (i=1;i<=NF;i++) c[$i]=i; next}
             {np=$c["n_prompt"]; ng=$c["n_gen"]; ts=$c["avg_ts"];
              if (np > 0) pp=ts; if (ng > 0) tg=ts}
             END {printf "%s %s", pp ? sprintf("%.1f", pp) : "-", tg ? sprintf("%.1f", tg) : "-"}'
}
say ""
say "| file | round | pooled pp | llama.cpp pp | pooled tg | llama.cpp tg | pooled decode GB/s | MB/token |"
say "|---|---|---|---|---|---|---|---|"
for p in $PRESETS; do
    for t in $TYPES; do
        f=$M/$p-$t.gguf
        [ -f "$f" ] || continue
        mb=$(($(stat -c %s "$f") / 1000000))
        for r in $(seq 1 "$ROUNDS"); do
            read -r ppp ptg pgb <<<"$(pooled_run "$f")"
            read -r lpp ltg <<<"$(llama_run "$f")"
            say "| $p $t | $r | $ppp | $lpp | $ptg | $ltg | $pgb | $mb |"
        done
    done
done
say ""
say "thread pool hand-over and memory read bandwidth (build/pool_lab):"
[ -x build/pool_lab ] && build/pool_lab --threads "1,2,4,8,$THREADS" --jobs 2000 --bw 2048 2>&1 | tee -a "$R"
say "total $(($(date +%s) - t0)) s"
