# lib.sh - helpers for end-to-end tests of the pooled command (sourced, not run).
# Each check adds to the counts; finish prints the RESULT line tests/run.sh reads.
set -u
POOLED=${POOLED_BIN:-build/pooled}
SHARED=${POOLED_SHARED:-../shared}
TMP=$(mktemp -d "${POOLED_TEST_TMP:-/tmp}/e2e.XXXXXX")
_pass=0; _fail=0
pass() { _pass=$((_pass + 1)); }
fail() { _fail=$((_fail + 1)); echo "FAIL: $*" >&2; }
# check DESCRIPTION COMMAND...: passes when the command exits 0
check() { local d=$1; shift; if "$@"; then pass; else fail "$d"; fi; }
# check_err DESCRIPTION COMMAND...: passes when the command exits non-zero with exactly one
# line on stderr, and did not crash (no signal, no sanitizer report).
check_err() {
    local d=$1; shift
    "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
    local lines; lines=$(wc -l <"$TMP/err")
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$lines" -eq 1 ] && ! grep -q Sanitizer "$TMP/err"; then pass
    else fail "$d (exit $rc, $lines stderr lines: $(head -c 300 "$TMP/err"))"; fi
}
finish() { echo "RESULT $_pass $_fail"; rm -rf "$TMP"; }
