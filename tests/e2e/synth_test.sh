#!/usr/bin/env bash
# synth_test.sh - `pooled synth` end to end: a one-layer SmolLM2-135M (hidden 576, 9/3 heads,
# head_dim 64, ffn 1536, per its config.json) reads back through `pooled info` with those
# shapes; same seed same bytes (any thread count), another seed other bytes; --vocab-from
# copies a tokenizer; a type whose blocks do not fit the rows falls back to f16 and says so;
# bad usage is one line on stderr.
. "$(dirname "$0")/lib.sh"

S=(--preset smollm2-135m --layers 1 --vocab 300)
check "synth q8_0" "$POOLED" synth "${S[@]}" --type q8_0 --seed 5 -o "$TMP/a.gguf" >/dev/null
"$POOLED" info --json "$TMP/a.gguf" >"$TMP/a.json"
q() { jq -r "$@" "$TMP/a.json"; }
check "llama architecture" [ "$(q .architecture)" = llama ]
check "1 layer" [ "$(q '.metadata["llama.block_count"].value')" = 1 ]
check "hidden 576, ffn 1536" [ "$(q '[.metadata["llama.embedding_length", "llama.feed_forward_length"].value] | join(",")')" = 576,1536 ]
check "9 heads, 3 kv heads" [ "$(q '[.metadata["llama.attention.head_count", "llama.attention.head_count_kv"].value] | join(",")')" = 9,3 ]
check "rope theta 100000" [ "$(q '.metadata["llama.rope.freq_base"].value')" = 100000 ]
check "300 tokens" [ "$(q '.metadata["tokenizer.ggml.tokens"].count')" = 300 ]
check "tied: no output.weight, 2 + 9 tensors" [ "$(q '.totals.tensors')" = 11 ]
check "token_embd [576,300]" [ "$(q -c '.tensors[] | select(.name == "token_embd.weight") | .shape')" = "[576,300]" ]
check "attn_q [576,576], attn_k [576,192]" \
    [ "$(q -c '[.tensors[] | select(.name == "blk.0.attn_q.weight" or .name == "blk.0.attn_k.weight") | .shape]')" = "[[576,192],[576,576]]" ]
check "ffn_down [1536,576]" [ "$(q -c '.tensors[] | select(.name == "blk.0.ffn_down.weight") | .shape')" = "[1536,576]" ]
check "matrices q8_0, norms f32" [ "$(q -c .totals.types)" = '{"f32":3,"q8_0":8}' ]
check "file type 7 (mostly Q8_0)" [ "$(q '.metadata["general.file_type"].value')" = 7 ]

check "same seed, 1 thread" "$POOLED" synth "${S[@]}" --type q8_0 --seed 5 --threads 1 -o "$TMP/b.gguf" >/dev/null
check "  ... same bytes" cmp -s "$TMP/a.gguf" "$TMP/b.gguf"
check "other seed" "$POOLED" synth "${S[@]}" --type q8_0 --seed 6 -o "$TMP/b.gguf" >/dev/null
if cmp -s "$TMP/a.gguf" "$TMP/b.gguf"; then fail "other seed, same bytes"; else pass; fi

# --vocab-from: every tokenizer.* key of the llama fixture (1024 tokens), and its size
V=$SHARED/fixtures/hf/llama/llama-q8_0.gguf
check "synth --vocab-from" "$POOLED" synth --preset smollm2-135m --layers 1 --type f16 --vocab-from "$V" -o "$TMP/v.gguf" >/dev/null
tok() { "$POOLED" info --json "$1" | jq -c '.metadata | with_entries(select(.key | startswith("tokenizer.")))'; }
check "  ... tokenizer keys equal the source's" [ "$(tok "$TMP/v.gguf")" = "$(tok "$V")" ]
check "  ... token_embd [576,1024]" [ "$("$POOLED" info --json "$TMP/v.gguf" | jq -c '.tensors[] | select(.name == "token_embd.weight") | .shape')" = "[576,1024]" ]

# q4_k has 256-value blocks: the 576-wide rows fall back to f16, ffn_down (1536) stays q4_k
out=$("$POOLED" synth "${S[@]}" --type q4_k -o "$TMP/k.gguf")
check "q4_k fallback is reported" grep -q "^note: 7 matrices are stored as f16" <<<"$out"
check "  ... and done" [ "$("$POOLED" info --json "$TMP/k.gguf" | jq -c .totals.types)" = '{"f32":3,"f16":7,"q4_k":1}' ]

check_err "unknown preset" "$POOLED" synth --preset gpt5 -o "$TMP/x.gguf"
check_err "arch does not match" "$POOLED" synth --arch qwen3 --preset smollm2-135m -o "$TMP/x.gguf"
check_err "unknown type" "$POOLED" synth "${S[@]}" --type q9_9 -o "$TMP/x.gguf"
check_err "type we cannot write" "$POOLED" synth "${S[@]}" --type iq2_xxs -o "$TMP/x.gguf"
check_err "no -o" "$POOLED" synth "${S[@]}"
check_err "no preset" "$POOLED" synth -o "$TMP/x.gguf"
check_err "vocabulary too small" "$POOLED" synth --preset smollm2-135m --vocab 10 -o "$TMP/x.gguf"
check_err "bad seed" "$POOLED" synth "${S[@]}" --seed -1 -o "$TMP/x.gguf"
check_err "output folder missing" "$POOLED" synth "${S[@]}" -o "$TMP/no/such/x.gguf"
check_err "--vocab-from missing" "$POOLED" synth "${S[@]::2}" --vocab-from "$TMP/none.gguf" -o "$TMP/x.gguf"
printf 'GGUF\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00' >"$TMP/empty.gguf"
check_err "--vocab-from without tokens" "$POOLED" synth "${S[@]::2}" --vocab-from "$TMP/empty.gguf" -o "$TMP/x.gguf"
check "no file left behind" [ ! -e "$TMP/x.gguf" ]
check "--help lists qwen3-8b" grep -q "qwen3-8b" <("$POOLED" synth --help)

finish
