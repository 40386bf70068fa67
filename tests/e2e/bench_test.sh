# bench_test.sh - `pooled bench --json`: the last line of stdout is one JSON object with the
# speeds, the time to the first id, the backend and the model.
. tests/e2e/lib.sh
"$POOLED" bench -m "$SHARED/models/stories260K.gguf" -p 32 -n 16 -r 2 --json >"$TMP/out" 2>"$TMP/err"
check "bench exits 0" [ $? -eq 0 ]
last=$(tail -n 1 "$TMP/out")
for k in prefill_tok_s ttft_ms decode_tok_s backend model peak_rss_mib; do
    check "json has $k" grep -q "\"$k\":" <<<"$last"
done
check "json is one object" grep -q '^{.*}$' <<<"$last"
# bench takes --backend auto like run: cpu here, webgpu on a machine with a hardware GPU
check "backend is cpu or webgpu" grep -Eq '"backend":"(cpu|webgpu)"' <<<"$last"
"$POOLED" bench -m "$SHARED/models/stories260K.gguf" -p 8 -n 4 -r 1 --backend cpu --json >"$TMP/out" 2>/dev/null
check "--backend cpu is reported as cpu" grep -q '"backend":"cpu"' <<<"$(tail -n 1 "$TMP/out")"
check "speeds are positive numbers" jq -e '.prefill_tok_s > 0 and .decode_tok_s > 0' <<<"$last" >/dev/null
# the first id comes after the prefill of the same run (the median of each is taken), and
# not much later: the head and one greedy pick
pp=$(jq -r '.prefill_tok_s // 0' <<<"$last")
ttft=$(jq -r '.ttft_ms // 0' <<<"$last")
check "time to first id is at least the prefill's 32 ids and under 2 s more (got $ttft ms at $pp tok/s)" \
    awk -v f="$ttft" -v p="$pp" 'BEGIN { pre = p > 0 ? 32000 / p : 1e9; exit !(f >= pre * 0.999 && f < pre + 2000) }'
check "the table prints the time to first id" grep -Eq "^first id +pp32 +[0-9.]+ ms" "$TMP/err"
check_err "bench with nothing to do" "$POOLED" bench -m "$SHARED/models/stories260K.gguf" -p 0 -n 0
check_err "bench on a missing file" "$POOLED" bench -m "$TMP/none.gguf"
finish
