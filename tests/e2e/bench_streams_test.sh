# bench_streams_test.sh - `pooled bench --streams N[,N...]`: N sessions read their prompts one
# after another, then every step appends one greedy id to all of them in one batched pass
# (sequential pushes where the family has no batched step). The JSON carries one entry per
# count with the aggregate speed, the ms per step, the ratio to N = 1, the times to first id
# and the ids the steps appended; --ids prints each stream's prompt and generated ids, which
# must be what `pooled run --temp 0` generates from that prompt alone.
. tests/e2e/lib.sh
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
S=$SHARED/models/stories260K.gguf
# jqv FILTER: true when $last is JSON and FILTER holds for it (empty input fails)
jqv() { [ -n "$last" ] && jq -e "$1" <<<"$last" >/dev/null; }
# same_as_run MODEL BACKEND N: every "ids N=N stream J: PROMPT | GEN" line of $TMP/err has
# GEN equal to pooled run's greedy ids for PROMPT (as many as GEN has)
same_as_run() {
    local lines=0 bad=0 prompt gen want
    while IFS='|' read -r prompt gen; do
        lines=$((lines + 1))
        prompt=${prompt#*:}
        want=$("$POOLED" run -m "$1" --backend "$2" --prompt-ids "$prompt" -n "$(wc -w <<<"$gen")" \
            --temp 0 --ignore-eos --ids 2>/dev/null)
        [ "$(echo $gen)" = "$(echo $want)" ] || { bad=$((bad + 1)); echo "stream $prompt: $gen, run: $want" >&2; }
    done < <(grep "^ids  *N=$3 stream" "$TMP/err")
    [ "$lines" -eq "$3" ] && [ "$bad" -eq 0 ]
}

# --- stories260K (a batched step): 12-id prompts, 6 steps, 1 and 3 streams
"$POOLED" bench -m "$S" --backend cpu -p 12 -n 6 -r 2 --streams 1,3 --ids --json >"$TMP/out" 2>"$TMP/err"
check "--streams 1,3 exits 0" [ $? -eq 0 ]
last=$(tail -n 1 "$TMP/out")
check "one entry per count, in order" jqv '[.streams[].n] == [1, 3]'
check "the steps appended -n ids to every stream" jqv 'all(.streams[]; .ids_appended == .n * 6)'
check "speeds and times are positive" jqv 'all(.streams[]; .tok_s > 0 and .ms_per_step > 0 and
    .ttft_ms_median > 0 and .ttft_ms_median <= .ttft_ms_max)'
check "tok/s = N * n / (n steps of ms_per_step)" jqv 'all(.streams[];
    ((.tok_s - .n * 1000 / .ms_per_step) | fabs) < 1e-6 * .tok_s)'
check "ratio to N = 1" jqv '.streams[0].ratio_to_1 == 1 and
    ((.streams[1].ratio_to_1 - .streams[1].tok_s / .streams[0].tok_s) | fabs) < 1e-9'
check "a batched step, ctx -p + -n rounded up to 64" jqv '.streams_batched and
    .streams_step == "batched" and .streams_ctx == 64 and .streams_state_bytes > 0'
check "bench's own keys are still there" jqv '.prefill_tok_s > 0 and .decode_tok_s > 0 and
    .ttft_ms > 0 and .n_prompt == 12 and .n_gen == 6'
check "three streams' prompts differ" [ "$(grep '^ids  *N=3' "$TMP/err" | cut -d'|' -f1 | cut -d: -f2 | sort -u | wc -l)" -eq 3 ]
check "stream 0 of N=3 generates what it does alone" \
    [ "$(grep '^ids  *N=1 stream 0:' "$TMP/err" | cut -d: -f2)" = "$(grep '^ids  *N=3 stream 0:' "$TMP/err" | cut -d: -f2)" ]
check "each of 3 batched streams generates pooled run's 7 ids" same_as_run "$S" cpu 3
check "the table names the counts" [ "$(grep -Ec '^streams +(1|3) +[0-9.]+ ' "$TMP/err")" -eq 2 ]
check "... and says the step is batched" grep -q "^streams .*; batched step" "$TMP/err"

# --- on the GPU (lavapipe in CI): 3 streams in cache slots of the batch, their greedy ids
# picked by one argmax of all columns: each stream's ids are pooled run's there
"$POOLED" bench -m "$S" --backend webgpu -p 12 -n 6 -r 1 --streams 3 --ids --json >/dev/null \
    2>"$TMP/err"
rc=$?
check "webgpu: --streams 3 exits 0 ($(head -c 300 "$TMP/err"))" [ $rc -eq 0 ]
check "webgpu: each of 3 batched streams generates pooled run's 7 ids" same_as_run "$S" webgpu 3

# --- 9 streams of the qwen3 fixture: the CPU's GEMM path of the batched step
Q3=$SHARED/fixtures/hf/qwen3/qwen3-q8_0.gguf
"$POOLED" bench -m "$Q3" --backend cpu -p 5 -n 3 -r 1 --streams 9 --ids --json >/dev/null 2>"$TMP/err"
check "qwen3: each of 9 batched streams generates pooled run's 4 ids" same_as_run "$Q3" cpu 9

# --- a Qwen3.5 hybrid without a batched step: sequential pushes, and it says so
Q35=$SHARED/fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf
"$POOLED" bench -m "$Q35" --backend cpu -p 6 -n 3 -r 1 --streams 2 --ids --json >"$TMP/out" 2>"$TMP/err"
last=$(tail -n 1 "$TMP/out")
# (the hybrids may gain a batched step: then the JSON and the table must say that instead)
case $(jq -r '.streams_batched' <<<"$last" 2>/dev/null) in
true)
    check "qwen3_5: a batched step, in the JSON" jqv '.streams_step == "batched"'
    check "qwen3_5: ... and in the table" grep -q "^streams .*; batched step" "$TMP/err" ;;
false)
    check "qwen3_5: sequential, in the JSON" jqv '.streams_step == "sequential"'
    check "qwen3_5: ... and in the table" grep -q "(no batched step: sequential)" "$TMP/err" ;;
*) fail "qwen3_5: --streams 2 gives no streams_batched ($(head -c 300 "$TMP/err"))" ;;
esac
check "qwen3_5: the steps appended 3 ids to both streams" jqv '.streams[0].ids_appended == 6'
check "qwen3_5: each stream generates pooled run's 4 ids" same_as_run "$Q35" cpu 2

# --- bad values: one line each
B=("$POOLED" bench -m "$S" --backend cpu -p 4 -n 2 -r 1)
for bad in 0 65 -1 x 1,,3 1, ,1 3,3 "1 3" 1,2,3,4,5,6,7,8,9 99999999999999999999; do
    check_err "--streams '$bad'" "${B[@]}" --streams "$bad"
done
check_err "--streams without a prompt" "${B[@]}" -p 0 --streams 2
check_err "--streams without steps" "${B[@]}" -n 0 --streams 2
check_err "--ids without --streams" "${B[@]}" --ids
check_err "--streams past --ctx" "${B[@]}" --ctx 5 --streams 2
check_err "--streams through a room (before waiting for workers)" timeout 30 "$POOLED" room bench -m "$S" --listen 127.0.0.1:0 --streams 2
# 64 streams (pooled.h's most sessions of one model) of a 32nd of the machine's memory
# each: refused after making one, before the rest (stories260K's f32 cache: 1280 bytes a
# position)
mem=$(($(getconf _PHYS_PAGES) * $(getconf PAGESIZE)))
ctx=$((mem / 32 / 1280))
[ $ctx -gt 16777216 ] && ctx=16777216
check_err "64 streams of --ctx $ctx" "${B[@]}" --kv f32 --ctx $ctx --streams 1,64
check "... say what they need" grep -q -- "--streams 64: 64 states of .* MiB (a KV cache of $ctx positions" "$TMP/err"
check "... and the rule" grep -q "more than the .* GiB of this machine's memory the weights leave" "$TMP/err"
finish
