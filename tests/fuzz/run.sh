#!/usr/bin/env bash
# run.sh SECONDS - run each libFuzzer target in build/fuzz for SECONDS, starting from its
# seed corpus in tests/fuzz/corpus/<name> (copied to a temp dir: shared/ is read-only).
# Prints a RESULT-free summary; exits non-zero if any fuzzer found a crash.
set -euo pipefail
secs=${1:-60}
status=0
for f in build/fuzz/*_fuzz; do
    [ -x "$f" ] || continue
    name=$(basename "$f")
    work=$(mktemp -d /tmp/pooled-fuzz.XXXXXX)
    [ -d "tests/fuzz/corpus/$name" ] && cp -r "tests/fuzz/corpus/$name/." "$work/"
    echo "fuzz: $name for ${secs}s"
    if ! "$f" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$work/" "$work" 2>"$work.log"; then
        tail -n 40 "$work.log"; status=1
    else
        grep -E "stat::number_of_executed_units|Done" "$work.log" | tail -n 2
    fi
    rm -rf "$work" "$work.log"
done
exit $status
