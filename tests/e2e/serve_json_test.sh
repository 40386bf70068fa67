# serve_json_test.sh - `pooled serve` with response_format (json_object, json_schema) driven
# by the OpenAI client library (tests/serve/json_schema.mjs) on the qwen3 fixture: random
# weights, so the JSON is random, but it must parse and hold the schema. With two slots,
# so the constrained picks run in continuous batching's steps.
. tests/e2e/lib.sh
. tests/e2e/serve_lib.sh
M=$SHARED/fixtures/hf/qwen3/qwen3-q8_0.gguf

if start serve -m "$M" --parallel 2; then
    node_checks tests/serve/json_schema.mjs URL="$URL"
    kill -TERM $PID; wait $PID; rc=$?
    check "SIGTERM: exit 0 (got $rc)" [ $rc = 0 ]
    check "no sanitizer report" bash -c "! grep -q Sanitizer '$TMP/serve.err'"
fi
finish
