#!/usr/bin/env bash
# synth_test.sh - `pooled synth` end to end: a one-layer SmolLM2-135M (hidden 576, 9/3 heads,
# head_dim 64, ffn 1536, per its config.json) reads back through `pooled info` with those
# shapes; same seed same bytes (any thread count), another seed other bytes; --vocab-from
# copies a tokenizer; a type whose blocks do not fit the rows falls back to f16 and says so;
# bad usage is one line on stderr.
# The MoE and hybrid presets (qwen3-30b-a3b, qwen3.5-27b, qwen3.5-35b-a3b), cut to 4 layers
# and written with --zeros (sparse: their real widths would be GBs), hold the metadata keys
# and the tensor names and types, in order, of llama.cpp's conversions of the same
# architectures (the fixtures' first 4 layers), with the published shapes.
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

# ---- MoE and hybrid presets against llama.cpp's converter output (fixtures, q8_0) ----
F=$SHARED/fixtures/hf
# the architecture's keys (not the tokenizer's) in order; tensors of layers 0-3 and the
# others but output.weight (the qwen3_5 fixture is tied, Qwen3.5-27B is not), [name, type]
# in order
keys() { jq -c '[.metadata | keys_unsorted[] | select(startswith("tokenizer.") | not)]' "$1"; }
tensors() { jq -c '[.tensors[] | select(.name | test("^blk\\.([4-9]|[1-9][0-9])\\.|^output\\.weight$") | not) | [.name, .type]]' "$1"; }
shape() { jq -c --arg n "$2" '.tensors[] | select(.name == $n) | .shape' "$1"; }
val() { jq -c --arg k "$2" '.metadata[$k].value' "$1"; }
for spec in qwen3-30b-a3b:qwen3_moe:qwen3moe qwen3.5-27b:qwen3_5:qwen35 qwen3.5-35b-a3b:qwen3_5_moe:qwen35moe; do
    IFS=: read -r P D A <<<"$spec"
    check "synth $P --layers 4 --zeros" "$POOLED" synth --preset "$P" --layers 4 --vocab 300 --type q8_0 --zeros -o "$TMP/$P.gguf" >/dev/null
    "$POOLED" info --json "$TMP/$P.gguf" >"$TMP/$P.json"
    "$POOLED" info --json "$F/$D/$D-q8_0.gguf" >"$TMP/$D.json"
    check "  ... architecture $A" [ "$(jq -r .architecture "$TMP/$P.json")" = "$A" ]
    check "  ... keys of the converter's $D file" [ "$(keys "$TMP/$P.json")" = "$(keys "$TMP/$D.json")" ]
    check "  ... tensor names and types of its first 4 layers" [ "$(tensors "$TMP/$P.json")" = "$(tensors "$TMP/$D.json")" ]
    check "  ... untied: output.weight first, as in the untied qwen3_moe and qwen3_5_moe files" \
        [ "$(jq -c '.tensors[0] | [.name, .type]' "$TMP/$P.json")" = '["output.weight","q8_0"]' ]
    check "  ... 4 layers" [ "$(val "$TMP/$P.json" "$A.block_count")" = 4 ]
    check "  ... fits in no disk space" [ "$(du -k "$TMP/$P.gguf" | cut -f1)" -lt 20000 ]
done
# shapes from the published configs
J=$TMP/qwen3-30b-a3b.json # hidden 2048, 32/4 heads of 128, 128 experts of 768, top 8
check "30b-a3b experts" [ "$(shape "$J" blk.0.ffn_gate_exps.weight)$(shape "$J" blk.3.ffn_down_exps.weight)$(shape "$J" blk.0.ffn_gate_inp.weight)" = "[2048,768,128][768,2048,128][2048,128]" ]
check "30b-a3b attention" [ "$(shape "$J" blk.1.attn_q.weight)$(shape "$J" blk.1.attn_k.weight)$(shape "$J" output.weight)" = "[2048,4096][2048,512][2048,300]" ]
check "30b-a3b metadata" [ "$(val "$J" qwen3moe.expert_count),$(val "$J" qwen3moe.expert_used_count),$(val "$J" qwen3moe.expert_feed_forward_length),$(val "$J" qwen3moe.feed_forward_length)" = 128,8,768,6144 ]
# 27B: hidden 5120, 24/4 heads of 256 (attn_q holds query and gate), FFN 17408; linear
# attention 16 key heads, 48 value heads of 128 (qkv 2*16*128 + 48*128 = 10240), conv 4
J=$TMP/qwen3.5-27b.json
check "27b linear attention" [ "$(shape "$J" blk.0.attn_qkv.weight)$(shape "$J" blk.2.ssm_conv1d.weight)$(shape "$J" blk.0.attn_gate.weight)$(shape "$J" blk.0.ssm_out.weight)$(shape "$J" blk.0.ssm_alpha.weight)$(shape "$J" blk.0.ssm_a)$(shape "$J" blk.0.ssm_norm.weight)" = "[5120,10240][4,10240][5120,6144][6144,5120][5120,48][48][128]" ]
check "27b full attention" [ "$(shape "$J" blk.3.attn_q.weight)$(shape "$J" blk.3.attn_k.weight)$(shape "$J" blk.3.attn_output.weight)$(shape "$J" blk.3.attn_q_norm.weight)" = "[5120,12288][5120,1024][6144,5120][256]" ]
check "27b FFN, untied" [ "$(shape "$J" blk.3.ffn_down.weight)$(shape "$J" output.weight)" = "[17408,5120][5120,300]" ]
check "27b metadata" [ "$(val "$J" qwen35.ssm.group_count),$(val "$J" qwen35.ssm.time_step_rank),$(val "$J" qwen35.ssm.state_size),$(val "$J" qwen35.ssm.inner_size),$(val "$J" qwen35.ssm.conv_kernel),$(val "$J" qwen35.full_attention_interval),$(val "$J" qwen35.rope.dimension_count),$(val "$J" qwen35.rope.dimension_sections),$(val "$J" qwen35.rope.freq_base)" = "16,48,128,6144,4,4,64,[11,11,10,0],10000000" ]
# 35B-A3B: hidden 2048, 16/2 heads of 256, 256 experts of 512 (8 used), shared expert 512,
# linear attention 16 key / 32 value heads of 128
J=$TMP/qwen3.5-35b-a3b.json
check "35b-a3b experts" [ "$(shape "$J" blk.0.ffn_up_exps.weight)$(shape "$J" blk.0.ffn_down_exps.weight)$(shape "$J" blk.0.ffn_gate_inp.weight)$(shape "$J" blk.0.ffn_gate_shexp.weight)$(shape "$J" blk.0.ffn_gate_inp_shexp.weight)" = "[2048,512,256][512,2048,256][2048,256][2048,512][2048,1]" ]
check "35b-a3b attention" [ "$(shape "$J" blk.0.attn_qkv.weight)$(shape "$J" blk.3.attn_q.weight)$(shape "$J" blk.3.attn_v.weight)" = "[2048,8192][2048,8192][2048,512]" ]
check "35b-a3b metadata" [ "$(val "$J" qwen35moe.expert_count),$(val "$J" qwen35moe.expert_used_count),$(val "$J" qwen35moe.expert_shared_feed_forward_length),$(val "$J" qwen35moe.ssm.time_step_rank)" = 256,8,512,32 ]
check_err "hybrid: layers not a multiple of the interval" "$POOLED" synth --preset qwen3.5-27b --layers 6 --zeros -o "$TMP/x.gguf"

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
