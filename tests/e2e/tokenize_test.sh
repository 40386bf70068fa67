#!/usr/bin/env bash
# tokenize_test.sh - `pooled tokenize` and `pooled template` against the references:
#   - every string of fixtures/llamacpp-b10573/tokenize.json on its four models, with and
#     without BOS (llama-tokenize's output), given as an argument and with --file;
#   - --pieces gives one line per token; --bench reports a speed;
#   - the four Qwen3 chat renderings of fixtures/hf/qwen3_realtok/ref.json, text and ids;
#   - bad usage and bad input: one line on stderr, non-zero exit, no crash.
. "$(dirname "$0")/lib.sh"

REF=$SHARED/fixtures/llamacpp-b10573/tokenize.json
model_path() {
    case $1 in
        ggml-vocab-*) echo "$SHARED/fixtures/vocab/$1" ;;
        *) echo "$SHARED/models/$1" ;;
    esac
}
for m in $(jq -r '.models | keys[]' "$REF"); do
    n=$(jq ".models[\"$m\"] | length" "$REF")
    for i in $(seq 0 $((n - 1))); do
        jq -j ".models[\"$m\"][$i].text" "$REF" >"$TMP/text"
        want=$(jq -r ".models[\"$m\"][$i].ids | map(tostring) | join(\" \")" "$REF")
        want_nb=$(jq -r ".models[\"$m\"][$i].ids_no_bos | map(tostring) | join(\" \")" "$REF")
        got=$("$POOLED" tokenize -m "$(model_path "$m")" -- "$(cat "$TMP/text")")
        [ "$got" = "$want" ] && pass || fail "$m case $i: got '$got' want '$want'"
        got=$("$POOLED" tokenize -m "$(model_path "$m")" --no-bos --file "$TMP/text")
        [ "$got" = "$want_nb" ] && pass || fail "$m case $i --no-bos --file: got '$got' want '$want_nb'"
    done
done

M=$SHARED/models/stories260K.gguf
lines=$("$POOLED" tokenize -m "$M" --pieces "Hello world" | wc -l)
[ "$lines" = 7 ] && pass || fail "--pieces: $lines lines (want 7: BOS and 6 tokens)"
"$POOLED" tokenize -m "$M" --pieces "Hello world" | head -n 1 | grep -q $'^1\t"<s>"$' && pass || fail "--pieces format"
"$POOLED" tokenize -m "$M" --bench 1 | grep -q "MB/s" && pass || fail "--bench"

Q=$SHARED/fixtures/hf/qwen3_realtok
for key in $(jq -r '.chat_template | keys[]' "$Q/ref.json"); do
    jq ".chat_template[\"$key\"].messages" "$Q/ref.json" >"$TMP/conv.json"
    jq -j ".chat_template[\"$key\"].text" "$Q/ref.json" >"$TMP/want.txt"
    want_ids=$(jq -r ".chat_template[\"$key\"].ids | map(tostring) | join(\" \")" "$Q/ref.json")
    flag=""
    [ "$(jq ".chat_template[\"$key\"].kwargs.enable_thinking" "$Q/ref.json")" = false ] && flag=--no-thinking
    "$POOLED" template -m "$Q/qwen3_realtok-q8_0.gguf" --messages "$TMP/conv.json" $flag >"$TMP/got.txt"
    cmp -s "$TMP/got.txt" "$TMP/want.txt" && pass || fail "template $key"
    got_ids=$("$POOLED" template -m "$Q/qwen3_realtok-q8_0.gguf" --messages "$TMP/conv.json" $flag --ids)
    [ "$got_ids" = "$want_ids" ] && pass || fail "template --ids $key"
done
# {"messages": [...]} and an explicit template file give the same text
jq '{messages: .chat_template["conv3_sys_user_assistant/default"].messages}' "$Q/ref.json" >"$TMP/obj.json"
jq -j '.chat_template["conv3_sys_user_assistant/default"].text' "$Q/ref.json" >"$TMP/want.txt"
"$POOLED" template -m "$Q/qwen3_realtok-q8_0.gguf" --messages "$TMP/obj.json" >"$TMP/got.txt"
cmp -s "$TMP/got.txt" "$TMP/want.txt" && pass || fail "template with {messages: ...}"
"$POOLED" template -m "$Q/qwen3_realtok-q8_0.gguf" --messages "$TMP/obj.json" \
    --template tests/fuzz/corpus/jinja_fuzz/qwen3.jinja >"$TMP/got.txt" && cmp -s "$TMP/got.txt" "$TMP/want.txt" && pass || fail "template --template"

check_err "tokenize without -m" "$POOLED" tokenize "hi"
check_err "tokenize missing model" "$POOLED" tokenize -m "$TMP/none.gguf" "hi"
check_err "tokenize non-GGUF" "$POOLED" tokenize -m "$TMP/want.txt" "hi"
check_err "tokenize unknown option" "$POOLED" tokenize -m "$M" --bogus
check_err "tokenize file and text" "$POOLED" tokenize -m "$M" --file "$TMP/want.txt" "hi"
check_err "tokenize missing file" "$POOLED" tokenize -m "$M" --file "$TMP/none.txt"
check_err "tokenize model without vocabulary" "$POOLED" tokenize -m tests/fuzz/corpus/gguf_fuzz/empty.gguf "hi"
check_err "template without --messages" "$POOLED" template -m "$Q/qwen3_realtok-q8_0.gguf"
printf '[{"role": "user", "content": "hi"' >"$TMP/bad.json"
check_err "template bad JSON" "$POOLED" template -m "$Q/qwen3_realtok-q8_0.gguf" --messages "$TMP/bad.json"
printf '{"role": "user"}' >"$TMP/obj1.json"
check_err "template not a list" "$POOLED" template -m "$Q/qwen3_realtok-q8_0.gguf" --messages "$TMP/obj1.json"
printf '[]' >"$TMP/empty.json"
check_err "template raising" "$POOLED" template -m "$Q/qwen3_realtok-q8_0.gguf" --messages "$TMP/empty.json" \
    --template tests/tokenizer/data/qwen35.jinja
check_err "template, no template in the model" "$POOLED" template -m "$M" --messages "$TMP/obj.json"
printf '{%% if %%}' >"$TMP/broken.jinja"
check_err "template that does not parse" "$POOLED" template -m "$M" --messages "$TMP/obj.json" --template "$TMP/broken.jinja"
finish
