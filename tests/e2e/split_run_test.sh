# split_run_test.sh - `pooled run --split N` (the test switch that runs the generation
# through a chain of N local stages, as a room's host does) prints exactly what `pooled run`
# prints: stories260K (text, greedy and seeded sampling) and the qwen3_5 hybrid fixture
# (ids; its 24-id prompt goes in one frame, and with POOLED_ROOM_FRAME=16 in frames of 16
# and 8), split 2 and 3 ways; bad splits and frame sizes are one line.
. tests/e2e/lib.sh
S=$SHARED/models/stories260K.gguf
Q=$SHARED/fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf
run() { "$POOLED" run --backend cpu "$@" 2>/dev/null; }

for args in "--temp 0" "--temp 0.9 --seed 11"; do
    want=$(run -m "$S" -p "Once upon a time" -n 48 $args)
    for n in 2 3; do
        got=$(run -m "$S" -p "Once upon a time" -n 48 $args --split $n)
        check "stories260K $args --split $n: the same text" [ -n "$want" -a "$got" = "$want" ]
    done
done
prompt=$(jq -r '.prompt_ids | map(tostring) | join(" ")' "$SHARED/fixtures/hf/qwen3_5/ref.json")
for args in "--temp 0" "--temp 0.9 --seed 5"; do
    want=$(run -m "$Q" --prompt-ids "$prompt" -n 24 --ignore-eos --ids $args)
    for n in 2 3; do
        got=$(run -m "$Q" --prompt-ids "$prompt" -n 24 --ignore-eos --ids $args --split $n)
        check "qwen3_5 $args --split $n: the same ids" [ -n "$want" -a "$got" = "$want" ]
    done
    got=$(POOLED_ROOM_FRAME=16 run -m "$Q" --prompt-ids "$prompt" -n 24 --ignore-eos --ids $args --split 2)
    check "qwen3_5 $args --split 2, frames of 16: the same ids" [ -n "$want" -a "$got" = "$want" ]
done
check_err "--split 0" "$POOLED" run -m "$S" -p "Once" -n 2 --split 0
check_err "--split past the layers" "$POOLED" run -m "$S" -p "Once" -n 2 --split 6
for f in 0 4097 12x; do
    check_err "POOLED_ROOM_FRAME=$f" env POOLED_ROOM_FRAME=$f "$POOLED" run --backend cpu -m "$S" -p "Once" -n 2 --split 2
done
finish
