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
# --kv q8: the state holds an int8 cache - 34 bytes per 32 values where f16 takes 64 and
# f32 128 - so with the activations the same, f16 - q8 = 15/32 of (f32 - f16)
for kv in f32 f16 q8; do
    "$POOLED" bench -m "$SHARED/models/stories260K.gguf" -p 4 -n 2 -r 1 --backend cpu --kv $kv \
        --json >"$TMP/out" 2>/dev/null
    line=$(tail -n 1 "$TMP/out")
    check "--kv $kv is reported" grep -q "\"kv\":\"$kv\"" <<<"$line"
    eval "state_$kv=$(grep -o '"state_bytes":[0-9]*' <<<"$line" | cut -d: -f2)"
done
check "the state is smaller with --kv q8 (f32 $state_f32, f16 $state_f16, q8 $state_q8 bytes)" \
    [ $((32 * (state_f16 - state_q8))) -eq $((15 * (state_f32 - state_f16))) -a $state_q8 -lt $state_f16 ]
check_err "bench with nothing to do" "$POOLED" bench -m "$SHARED/models/stories260K.gguf" -p 0 -n 0
check_err "bench on a missing file" "$POOLED" bench -m "$TMP/none.gguf"
finish
