# moe_run_test.sh - `pooled run` on the mixture-of-experts fixture (qwen3_moe, q8_0 weights
# that dequantise to exactly transformers' float32 ones): with --act f32 the 32 greedy ids
# are transformers' float64 ones; with the default --act q8 they are llama.cpp b10573's own
# (llamacpp.json); the load report names the experts.
. tests/e2e/lib.sh
FIX=$SHARED/fixtures/hf/qwen3_moe
M=$FIX/qwen3_moe-q8_0.gguf

prompt=$(jq -r '.prompt_ids | map(tostring) | join(" ")' "$FIX/ref.json")
want=$(jq -r '.greedy_fp64 | map(tostring) | join(" ")' "$FIX/ref.json")
got=$("$POOLED" run -m "$M" --prompt-ids "$prompt" -n 32 --temp 0 --ignore-eos --ids --act f32 \
    --backend cpu 2>"$TMP/err")
check "--act f32: 32 greedy ids equal transformers' fp64 ids" [ -n "$want" -a "$got" = "$want" ]
check "report: 8 experts, 2 active" grep -q "^loaded qwen3moe .*8 experts, 2 active" "$TMP/err"

want=$(jq -r '.runs["qwen3_moe-q8_0.gguf"].gen | map(tostring) | join(" ")' "$FIX/llamacpp.json")
got=$("$POOLED" run -m "$M" --prompt-ids "$prompt" -n 32 --temp 0 --ignore-eos --ids --kv f32 \
    --backend cpu 2>/dev/null)
check "--act q8: 32 greedy ids equal llama.cpp's" [ -n "$want" -a "$got" = "$want" ]
finish
