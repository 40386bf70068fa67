# bench_test.sh - `pooled bench --json`: the last line of stdout is one JSON object with the
# speeds, the backend and the model.
. tests/e2e/lib.sh
"$POOLED" bench -m "$SHARED/models/stories260K.gguf" -p 32 -n 16 -r 2 --json >"$TMP/out" 2>"$TMP/err"
check "bench exits 0" [ $? -eq 0 ]
last=$(tail -n 1 "$TMP/out")
for k in prefill_tok_s decode_tok_s backend model peak_rss_mib; do
    check "json has $k" grep -q "\"$k\":" <<<"$last"
done
check "json is one object" grep -q '^{.*}$' <<<"$last"
# bench takes --backend auto like run: cpu here, webgpu on a machine with a hardware GPU
check "backend is cpu or webgpu" grep -Eq '"backend":"(cpu|webgpu)"' <<<"$last"
"$POOLED" bench -m "$SHARED/models/stories260K.gguf" -p 8 -n 4 -r 1 --backend cpu --json >"$TMP/out" 2>/dev/null
check "--backend cpu is reported as cpu" grep -q '"backend":"cpu"' <<<"$(tail -n 1 "$TMP/out")"
check "speeds are positive numbers" grep -Eq '"prefill_tok_s":[1-9][0-9.e+]*,"decode_tok_s":[1-9]' <<<"$last"
check_err "bench with nothing to do" "$POOLED" bench -m "$SHARED/models/stories260K.gguf" -p 0 -n 0
check_err "bench on a missing file" "$POOLED" bench -m "$TMP/none.gguf"
finish
