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
# --verify-cost: a step and a pass per K; the drafts are plain steps' ids, so each pass
# accepts all K (its columns equal plain steps); the projection is (1 - a^(K+1)) / (1 - a)
# ids per pass over the pass's time, recomputed here from pass_ms
# jqv FILTER: true when the last line is JSON and FILTER holds for it (empty input fails)
jqv() { [ -n "$last" ] && jq -e "$1" <<<"$last" >/dev/null; }
for m in models/stories260K fixtures/hf/qwen3_5/qwen3_5-q8_0; do
    "$POOLED" bench -m "$SHARED/$m.gguf" --backend cpu -p 8 -n 0 -r 2 --verify-cost 3,1,15 --json \
        >"$TMP/out" 2>"$TMP/err"
    check "$m: --verify-cost exits 0" [ $? -eq 0 ]
    last=$(tail -n 1 "$TMP/out")
    check "$m: depth and step" jqv '.verify_depth == 8 and .verify_step_ms > 0'
    check "$m: one entry per K, in order" jqv '[.verify[].k] == [3, 1, 15]'
    check "$m: every draft accepted" jqv 'all(.verify[]; .accepted == .k)'
    check "$m: ratio = pass / step" jqv '. as $o | all(.verify[]; .pass_ms > 0 and
        ((.ratio - .pass_ms / $o.verify_step_ms) | fabs) < 1e-9 * .ratio)'
    check "$m: projected tok/s" jqv 'all(.verify[]; . as $v | all([[0.5, .tok_s_a50],
        [0.7, .tok_s_a70], [0.9, .tok_s_a90]][]; ((1 - pow(.[0]; $v.k + 1)) / (1 - .[0]) * 1000
        / $v.pass_ms) as $want | ((.[1] - $want) | fabs) < 1e-6 * $want))'
    check "$m: the table names each K" [ "$(grep -Ec '^verify +(3|1|15) ' "$TMP/err")" -eq 3 ]
done
B=("$POOLED" bench -m "$SHARED/models/stories260K.gguf" --backend cpu -n 0 -r 1)
check "--verify-cost without --json: the table on stdout" grep -Eq '^verify +1 +[0-9.]+ +[0-9.]+ ' \
    <<<"$("${B[@]}" -p 4 --verify-cost 1 2>/dev/null)"
for bad in 0 16 -1 x 1,,3 1, ,1 3,3 "1 3" 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 99999999999999999999; do
    check_err "--verify-cost '$bad'" "${B[@]}" -p 4 --verify-cost "$bad"
done
check_err "--verify-cost without a prompt" "${B[@]}" -p 0 -n 4 --verify-cost 1
check_err "--verify-cost past --ctx" "${B[@]}" -p 8 --ctx 10 --verify-cost 3
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
# --split 2: the model as a host and a local stage in one chain (a room without the wire)
"$POOLED" bench -m "$SHARED/models/stories260K.gguf" -p 8 -n 8 -r 1 --backend cpu --split 2 \
    --json >"$TMP/out" 2>"$TMP/err"
rc=$?
check "--split 2 exits 0 ($(tail -n 1 "$TMP/err"))" [ $rc -eq 0 ]
check "--split 2 reports its speeds" jq -e '.prefill_tok_s > 0 and .decode_tok_s > 0' \
    <<<"$(tail -n 1 "$TMP/out")" >/dev/null
check_err "--split past 63" "$POOLED" bench -m "$SHARED/models/stories260K.gguf" --split 64
check_err "bench with nothing to do" "$POOLED" bench -m "$SHARED/models/stories260K.gguf" -p 0 -n 0
check_err "bench on a missing file" "$POOLED" bench -m "$TMP/none.gguf"
finish
