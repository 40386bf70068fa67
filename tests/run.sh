#!/usr/bin/env bash
# run.sh - run every test program (and tests/e2e/*.sh script), add up their RESULT lines,
# and end with "N passed, N failed". Exit status is non-zero if anything failed or crashed.
set -u
BUILD=${POOLED_BUILD:-build}
export POOLED_BIN=${POOLED_BIN:-$BUILD/pooled}
export POOLED_SHARED=${POOLED_SHARED:-../shared}
export POOLED_TEST_TMP=$(mktemp -d /tmp/pooled-tests.XXXXXX)
trap 'rm -rf "$POOLED_TEST_TMP"' EXIT
filter=${1:-}

passed=0; failed=0
run_one() {
    local name=$1; shift
    local out rc start end
    start=$(date +%s.%N)
    out=$("$@" 2>&1); rc=$?
    end=$(date +%s.%N)
    local line p f
    line=$(printf '%s\n' "$out" | grep '^RESULT ' | tail -n 1)
    if [ -z "$line" ]; then
        printf '%s\n' "$out" | tail -n 30
        echo "CRASH $name (exit $rc, no RESULT line)"
        failed=$((failed + 1)); return
    fi
    p=$(echo "$line" | awk '{print $2}'); f=$(echo "$line" | awk '{print $3}')
    if [ "$f" != 0 ] || [ "$rc" != 0 ]; then
        printf '%s\n' "$out" | grep -v '^RESULT ' | tail -n 40
        [ "$f" = 0 ] && f=1
    fi
    passed=$((passed + p)); failed=$((failed + f))
    printf '%-32s %5d passed %3d failed  %6.2fs\n' "$name" "$p" "$f" "$(awk -v a="$start" -v b="$end" 'BEGIN{print b-a}')"
}

for t in $(ls "$BUILD"/tests/ 2>/dev/null | sort); do
    [ -n "$filter" ] && [[ "$t" != *"$filter"* ]] && continue
    run_one "$t" "$BUILD/tests/$t"
done
for s in $(ls tests/e2e/*_test.sh 2>/dev/null | sort); do
    n=$(basename "$s" .sh)
    [ -n "$filter" ] && [[ "$n" != *"$filter"* ]] && continue
    run_one "$n" bash "$s"
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
