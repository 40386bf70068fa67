# serve_load_test.sh - the load test of `pooled serve --parallel` (tests/serve/load.mjs):
# 64 streaming clients at once plus a stream of malformed requests for LOAD_SECONDS
# (default 8 in CI, to keep within its time budget; the full run is
# LOAD_SECONDS=60, see docs/serve.md) on stories260K: every well-formed request gets the
# single-client greedy answer, every bad one its error, the server's RSS stays bounded,
# /health keeps answering, hung-up streams are cancelled and nothing is left in flight.
# The queue has room for every client and the malformed requests that reach the workers
# (/detokenize), and for hung-up streams until their workers notice.
. tests/e2e/lib.sh
. tests/e2e/serve_lib.sh
S=$SHARED/models/stories260K.gguf
CLIENTS=${LOAD_CLIENTS:-64}
MAX=32
# the single-client greedy answers
: >"$TMP/cases.jsonl"
for p in "Once upon a time" "The little dog ran to the park" "Lily had a red ball" "One day, a big bird"; do
    "$POOLED" run -m "$S" -p "$p" --temp 0 -n $MAX 2>/dev/null >"$TMP/expect"
    jq -n --arg p "$p" --rawfile e "$TMP/expect" '{prompt: $p, expect: $e}' >>"$TMP/cases.jsonl"
done
jq -s . "$TMP/cases.jsonl" >"$TMP/cases.json"
if start load -m "$S" --parallel 16 --queue $((CLIENTS + 16)); then
    node_checks tests/serve/load.mjs URL="$URL" PID=$PID LOG="$TMP/load.err" CASES="$TMP/cases.json" \
        LOAD_SECONDS="${LOAD_SECONDS:-8}" CLIENTS=$CLIENTS MAX_TOKENS=$MAX
    kill -TERM $PID; wait $PID; rc=$?
    check "SIGTERM after the load: exit 0 (got $rc)" [ $rc = 0 ]
    check "no sanitizer report" bash -c "! grep -q Sanitizer '$TMP/load.err'"
fi
finish
