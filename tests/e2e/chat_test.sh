# chat_test.sh - `pooled chat` on the real-tokenizer Qwen3 fixture: two turns, the second
# running only the ids that are new; /reset starts over; /quit ends with status 0.
. tests/e2e/lib.sh
M=$SHARED/fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf
printf 'Hello there\nAnd a second question\n/reset\nHello there\n/quit\nnever read\n' |
    "$POOLED" chat -m "$M" --temp 0 -n 8 --timings >"$TMP/out" 2>"$TMP/err"
check "chat exits 0 on /quit" [ $? -eq 0 ]
check "three replies" [ "$(wc -l <"$TMP/out")" -eq 3 ]
t1=$(grep '^turn 1:' "$TMP/err"); t2=$(grep '^turn 2:' "$TMP/err"); t3=$(grep '^turn 3:' "$TMP/err")
run1=$(sed 's/turn 1: \([0-9]*\) prompt ids run (\([0-9]*\) reused).*/\1 \2/' <<<"$t1")
run2=$(sed 's/turn 2: \([0-9]*\) prompt ids run (\([0-9]*\) reused).*/\1 \2/' <<<"$t2")
# turn 2 reuses turn 1's prompt and its reply (all 8 ids but the last, never fed back)
set -- $run1; n1=$1; r1=$2
set -- $run2; n2=$1; r2=$2
check "turn 1 runs everything" [ "$r1" = 0 -a "$n1" -gt 0 ]
check "turn 2 reuses turn 1 (run $n2, reused $r2)" [ "$r2" -eq $((n1 + 8 - 1)) ]
check "turn 2 runs only the new ids" [ "$n2" -lt 20 ]
check "after /reset nothing is reused" grep -q "run (0 reused)" <<<"$t3"
check "same first reply after /reset" [ "$(sed -n 1p "$TMP/out")" = "$(sed -n 3p "$TMP/out")" ]
finish
