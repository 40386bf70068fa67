#!/usr/bin/env bash
# run.sh SECONDS - run each libFuzzer target in build/fuzz for SECONDS, starting from its
# seed corpus in tests/fuzz/corpus/<name> (copied to a temp dir: shared/ is read-only and the
# corpus in the repo only grows by hand, with inputs worth keeping as regressions).
# As many fuzzers run at once as there are cores (FUZZ_JOBS overrides), so CI's two cores
# finish all targets in half the time.
# A fuzzer that fails keeps its crash input, its log and its working corpus under
# build/fuzz-artifacts/<name>/ and the path is printed; exits non-zero if any fuzzer failed.
# FUZZ_SEED (default 1) fixes libFuzzer's mutation sequence so that a run here explores what
# CI's run explores and a CI failure can be replayed; FUZZ_SEED=0 draws a fresh seed each run
# (what to use for long searches before a submission).
set -uo pipefail
secs=${1:-60}
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
seed=${FUZZ_SEED:-1}
keep=build/fuzz-artifacts
tmp=$(mktemp -d /tmp/pooled-fuzz.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# one fuzzer: its exit status lands in $tmp/<name>.rc
fuzz_one() {
    local f=$1 name work
    name=$(basename "$f")
    work=$tmp/$name
    mkdir -p "$work/corpus" "$work/found"
    [ -d "tests/fuzz/corpus/$name" ] && cp -r "tests/fuzz/corpus/$name/." "$work/corpus/"
    "$f" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -seed="$seed" \
        -artifact_prefix="$work/found/" "$work/corpus" >"$work/log" 2>&1
    echo $? >"$tmp/$name.rc"
}

names=()
for f in build/fuzz/*_fuzz; do
    [ -x "$f" ] || continue
    names+=("$(basename "$f")")
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    echo "fuzz: $(basename "$f") for ${secs}s"
    fuzz_one "$f" &
done
wait

status=0
for name in "${names[@]}"; do
    rc=$(cat "$tmp/$name.rc" 2>/dev/null || echo 1)
    if [ "$rc" = 0 ]; then
        echo "$name: $(grep -E "stat::number_of_executed_units" "$tmp/$name/log" | tail -n 1)"
        continue
    fi
    status=1
    # the reason first (a REQUIRE line or the sanitizer's report), then the log's end
    grep -m 3 -E "failed \(line|ERROR:|runtime error" "$tmp/$name/log"
    tail -n 40 "$tmp/$name/log"
    mkdir -p "$keep"
    dest=$(mktemp -d "$keep/$name.XXXXXX")
    cp -r "$tmp/$name/." "$dest/"
    echo "FUZZ FAIL $name (exit $rc): crash inputs in $dest/found/, log in $dest/log"
    for a in "$dest"/found/*; do [ -e "$a" ] && echo "  $a"; done
done
exit $status
