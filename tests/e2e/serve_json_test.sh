# serve_json_test.sh - `pooled serve` with response_format (json_object, json_schema) driven
# by the OpenAI client library (tests/serve/json_schema.mjs) on the qwen3 fixture: random
# weights, so the JSON is random, but it must parse and hold the schema.
. tests/e2e/lib.sh
M=$SHARED/fixtures/hf/qwen3/qwen3-q8_0.gguf

"$POOLED" serve -m "$M" --host 127.0.0.1 --port 0 >"$TMP/serve.out" 2>"$TMP/serve.err" &
PID=$!
URL=
for _ in $(seq 200); do
    URL=$(sed -n 's/^pooled serve: listening on //p' "$TMP/serve.out")
    [ -n "$URL" ] && curl -sf "$URL/health" >/dev/null && break
    URL=
    kill -0 $PID 2>/dev/null || break
    sleep 0.1
done
if [ -n "$URL" ]; then
    out=$(URL=$URL node tests/serve/json_schema.mjs 2>&1)
    echo "$out" | grep -v '^RESULT'
    res=$(echo "$out" | sed -n 's/^RESULT //p')
    if [ -n "$res" ]; then
        _pass=$((_pass + ${res% *})); _fail=$((_fail + ${res#* }))
    else
        fail "json_schema.mjs ended without a RESULT line"
    fi
    kill -TERM $PID; wait $PID; rc=$?
    check "SIGTERM: exit 0 (got $rc)" [ $rc = 0 ]
    check "no sanitizer report" bash -c "! grep -q Sanitizer '$TMP/serve.err'"
else
    fail "the server did not come up: $(tail -n 3 "$TMP/serve.err")"
    kill $PID 2>/dev/null
fi
finish
