# spec_run_test.sh - `--spec lookup`, `mtp` (and auto) on run, chat and bench: the same ids as
# `--spec off` (greedy and seeded sampling with penalties, CPU and a --split chain; mtp on
# both -mtp- fixtures, and over a --split chain), the acceptance report, and one-line
# errors for `--spec mtp` on a model without the block, and for unknown values.
. tests/e2e/lib.sh
M="$SHARED/models/stories260K.gguf"
P="Lily and Tom. Lily and Tom. Lily and Tom. Lily and Tom."
for opts in "--temp 0" "--temp 0.8 --top-k 40 --top-p 0.9 --repeat-penalty 1.1 --seed 7" \
    "--temp 0 --split 2" "--temp 0.8 --seed 3 --split 2"; do
    # shellcheck disable=SC2086
    "$POOLED" run -m "$M" --backend cpu -p "$P" -n 48 --ids $opts --spec off >"$TMP/off" 2>/dev/null
    # shellcheck disable=SC2086
    "$POOLED" run -m "$M" --backend cpu -p "$P" -n 48 --ids $opts --spec lookup >"$TMP/on" 2>"$TMP/err"
    check "run $opts: lookup ids == plain ids" cmp -s "$TMP/off" "$TMP/on"
    # shellcheck disable=SC2086
    "$POOLED" run -m "$M" --backend cpu -p "$P" -n 48 --ids $opts --spec auto >"$TMP/auto" 2>/dev/null
    check "run $opts: auto ids == plain ids" cmp -s "$TMP/off" "$TMP/auto"
    check "run $opts: 48 ids" [ "$(wc -w <"$TMP/on")" -eq 48 ]
    check "run $opts: acceptance reported" grep -Eq '^spec: [0-9]+ passes, [1-9][0-9]* of [0-9]+ drafts accepted' "$TMP/err"
done
# chat: two turns on the hybrid (recurrent) fixture, which has ChatML markers
printf 'Lily and Tom. Lily and Tom. Lily and Tom.\nagain\n' >"$TMP/in"
for sp in off lookup; do
    "$POOLED" chat -m "$SHARED/fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf" --backend cpu --temp 0.8 \
        --seed 5 -n 32 --spec $sp <"$TMP/in" >"$TMP/chat_$sp" 2>/dev/null
done
check "chat: replies" [ -s "$TMP/chat_off" ]
check "chat: lookup replies == plain replies" cmp -s "$TMP/chat_off" "$TMP/chat_lookup"
"$POOLED" bench -m "$M" --backend cpu -p 0 -n 32 -r 1 --spec lookup --json >"$TMP/out" 2>/dev/null
check "bench --spec lookup exits 0" [ $? -eq 0 ]
check "bench reports acceptance and ids per pass" grep -q '"spec":"lookup","spec_acceptance":[0-9.e+-]*,"spec_ids_per_pass":[1-9]' <<<"$(tail -n 1 "$TMP/out")"
# the model's own MTP block: both -mtp- fixtures, greedy and seeded with penalties
for f in qwen3_5/qwen3_5-mtp-q8_0 qwen3_5_moe/qwen3_5_moe-mtp-q8_0; do
    F="$SHARED/fixtures/hf/$f.gguf"
    for opts in "--temp 0" "--temp 0.8 --top-k 40 --top-p 0.9 --repeat-penalty 1.1 --seed 7"; do
        # shellcheck disable=SC2086
        "$POOLED" run -m "$F" --backend cpu -p "$P" -n 24 --ids $opts --spec off >"$TMP/off" 2>/dev/null
        # shellcheck disable=SC2086
        "$POOLED" run -m "$F" --backend cpu -p "$P" -n 24 --ids $opts --spec mtp >"$TMP/on" 2>"$TMP/err"
        check "$f $opts: mtp ids == plain ids" cmp -s "$TMP/off" "$TMP/on"
        check "$f $opts: 24 ids" [ "$(wc -w <"$TMP/on")" -eq 24 ]
        check "$f $opts: drafts reported" grep -Eq '^spec: [0-9]+ passes, [0-9]+ of [1-9][0-9]* drafts accepted' "$TMP/err"
    done
done
F="$SHARED/fixtures/hf/qwen3_5/qwen3_5-mtp-q8_0.gguf"
for sp in off mtp; do
    "$POOLED" chat -m "$F" --backend cpu --temp 0.8 --seed 5 -n 16 --spec $sp <"$TMP/in" >"$TMP/chat_$sp" 2>/dev/null
done
check "chat: mtp replies == plain replies" cmp -s "$TMP/chat_off" "$TMP/chat_mtp"
"$POOLED" bench -m "$F" --backend cpu -p 0 -n 16 -r 1 --spec auto --json >"$TMP/out" 2>/dev/null
check "bench --spec auto takes the MTP block" grep -q '"spec":"mtp","spec_acceptance":[0-9.e+-]*,"spec_ids_per_pass":[1-9]' <<<"$(tail -n 1 "$TMP/out")"
check_err "--spec mtp on a model without the block" "$POOLED" run -m "$M" -p x --spec mtp
# over a chain of stages (--split) the host drafts with the block it holds with the head
for opts in "--temp 0" "--temp 0.8 --top-k 40 --top-p 0.9 --repeat-penalty 1.1 --seed 7"; do
    # shellcheck disable=SC2086
    "$POOLED" run -m "$F" --backend cpu -p "$P" -n 24 --ids $opts --spec off >"$TMP/off" 2>/dev/null
    # shellcheck disable=SC2086
    "$POOLED" run -m "$F" --backend cpu -p "$P" -n 24 --ids $opts --split 2 --spec mtp >"$TMP/on" 2>"$TMP/err"
    check "--split 2 $opts: mtp ids == plain ids" cmp -s "$TMP/off" "$TMP/on"
    check "--split 2 $opts: drafts reported" grep -Eq '^spec: [0-9]+ passes, [0-9]+ of [1-9][0-9]* drafts accepted' "$TMP/err"
done
check_err "--spec bogus" "$POOLED" run -m "$M" -p x --spec bogus
finish
