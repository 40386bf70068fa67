#!/usr/bin/env bash
# cli_test.sh - the command's polish (issue 14): --version, the prompt from a file or from
# standard input (-f, -p -), a newline after run's text on a terminal only, -c/--ctx-size
# as --ctx, --no-think on template, bench --json printing only JSON on stdout, --stop on
# run and chat, and Ctrl-C in chat stopping the reply but not the conversation.
. "$(dirname "$0")/lib.sh"
M=$SHARED/models/stories260K.gguf
RUN=("$POOLED" run -m "$M" --temp 0 --backend cpu -n 40)

# --version: the header's version numbers
v=$(sed -n 's/^#define POOLED_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' include/pooled.h | paste -sd.)
check "pooled --version" test "$("$POOLED" --version)" = "pooled $v"
check "pooled version" test "$("$POOLED" version)" = "pooled $v"

# the prompt from a file, from standard input
P="Once upon a time"
"${RUN[@]}" -p "$P" >"$TMP/p.txt" 2>/dev/null
printf '%s' "$P" >"$TMP/prompt.txt"
"${RUN[@]}" -f "$TMP/prompt.txt" >"$TMP/f.txt" 2>/dev/null
check "-f FILE is -p TEXT" cmp "$TMP/p.txt" "$TMP/f.txt"
printf '%s' "$P" | "${RUN[@]}" -p - >"$TMP/s.txt" 2>/dev/null
check "-p - reads standard input" cmp "$TMP/p.txt" "$TMP/s.txt"
printf '%s' "$P" | "${RUN[@]}" --file - >"$TMP/s2.txt" 2>/dev/null
check "--file - reads standard input" cmp "$TMP/p.txt" "$TMP/s2.txt"
check_err "-f of a missing file" "${RUN[@]}" -f "$TMP/none.txt"
printf 'a\0b' >"$TMP/nul.txt"
check_err "-f of a file with a NUL byte" "${RUN[@]}" -f "$TMP/nul.txt"
check_err "-p and -f together" "${RUN[@]}" -p "$P" -f "$TMP/prompt.txt"

# error lines name the command that was run
check_err "room host: an unknown option" "$POOLED" room host -m "$M" --bogus
check "the error names room host" grep -q "^pooled: room host: unknown option '--bogus' (pooled room host --help)" "$TMP/err"
check_err "run: an unknown option" "$POOLED" run -m "$M" -p hi --bogus
check "the error names run" grep -q "^pooled: run: unknown option '--bogus' (pooled run --help)" "$TMP/err"

# a newline after the text on a terminal, none into a pipe or file
check "no newline into a file" test "$(tail -c1 "$TMP/p.txt" | od -An -c | tr -d ' ')" != '\n'
if command -v script >/dev/null; then
    script -qec "$(printf '%q ' "${RUN[@]}" -p "$P") 2>/dev/null" /dev/null >"$TMP/tty.txt"
    check "a newline on a terminal" test "$(tail -c2 "$TMP/tty.txt" | od -An -c | tr -d ' ')" = '\r\n'
fi

# -c and --ctx-size are --ctx
for o in -c --ctx-size --ctx; do
    "${RUN[@]}" -p "$P" $o 64 2>"$TMP/err" >/dev/null
    check "$o 64" grep -q "ctx 64 of" "$TMP/err"
done

# bench --json: stdout is only the JSON object
"$POOLED" bench -m "$M" -p 8 -n 4 -r 1 --backend cpu --json >"$TMP/b.json" 2>"$TMP/b.err"
check "bench --json stdout is one JSON value" jq -e 'type == "object" and has("decode_tok_s")' "$TMP/b.json" >/dev/null
check "bench --json stdout is one line" test "$(wc -l <"$TMP/b.json")" -eq 1
check "bench --json table on stderr" grep -q '^decode ' "$TMP/b.err"

# --stop: the text up to the first stop string
full=$(cat "$TMP/p.txt")
stop=${full:25:4}
"${RUN[@]}" -p "$P" --stop "never in the text" --stop "$stop" >"$TMP/stop.txt" 2>/dev/null
check "--stop cuts the text before the string" test "$(cat "$TMP/stop.txt")" = "${full%%"$stop"*}"
check "--stop: nothing after" test "$(wc -c <"$TMP/stop.txt")" -lt "${#full}"
check_err "--stop with an empty string" "${RUN[@]}" -p "$P" --stop ""
stops=(); for i in $(seq 17); do stops+=(--stop "s$i"); done
check_err "17 --stop strings" "${RUN[@]}" -p "$P" "${stops[@]}"

# chat: a ChatML model with random weights (its replies never end on their own)
Q=$TMP/q.gguf
"$POOLED" synth --preset qwen3-0.6b --layers 1 --vocab 300 -o "$Q" >/dev/null 2>&1
printf '[{"role":"user","content":"hi"}]' >"$TMP/m.json"
"$POOLED" template -m "$Q" --messages "$TMP/m.json" --no-thinking >"$TMP/t1.txt"
"$POOLED" template -m "$Q" --messages "$TMP/m.json" --no-think >"$TMP/t2.txt"
check "template --no-think is --no-thinking" cmp "$TMP/t1.txt" "$TMP/t2.txt"
CHAT=("$POOLED" chat -m "$Q" --temp 0 --backend cpu --ctx 1024)
printf 'hello\n' | "${CHAT[@]}" -n 24 >"$TMP/c1.txt" 2>/dev/null
r1=$(head -n1 "$TMP/c1.txt")
cs=${r1:6:3}
printf 'hello\n' | "${CHAT[@]}" -n 24 --stop "$cs" >"$TMP/c2.txt" 2>/dev/null
check "chat --stop cuts the reply" test "$(head -n1 "$TMP/c2.txt")" = "${r1%%"$cs"*}"

# Ctrl-C during a reply stops it; the chat goes on with the reply kept in the conversation
mkfifo "$TMP/in"
"${CHAT[@]}" --timings <"$TMP/in" >"$TMP/out" 2>"$TMP/err" &
pid=$!
exec 3>"$TMP/in"
wait_for() { # SECONDS CONDITION...
    local t=$(($1 * 10)); shift
    while [ $t -gt 0 ] && ! "$@"; do sleep 0.1; t=$((t - 1)); done
    "$@"
}
stopped() { [ "$(grep -c '^(reply stopped)' "$TMP/err")" -ge "$1" ]; }
grown() { [ "$(wc -c <"$TMP/out")" -gt "$1" ]; }
echo "hello" >&3
wait_for 60 test -s "$TMP/out"
kill -INT $pid
check "first reply stopped" wait_for 60 stopped 1
n1=$(wc -c <"$TMP/out")
echo "and again" >&3
wait_for 60 grown $((n1 + 2))
kill -INT $pid
check "second reply stopped" wait_for 60 stopped 2
echo "/quit" >&3
exec 3>&-
wait_for 60 bash -c "! kill -0 $pid 2>/dev/null" || kill -KILL $pid
wait $pid
check "chat exits 0 after Ctrl-C in replies" test $? -eq 0
t2=$(grep '^turn 2:' "$TMP/err")
reused=$(sed 's/.*(\([0-9]*\) reused).*/\1/' <<<"$t2")
run1=$(grep '^turn 1:' "$TMP/err" | sed 's/turn 1: \([0-9]*\) prompt.*/\1/')
check "turn 2 reuses turn 1 and its stopped reply ($reused reused, $run1 in turn 1)" \
    test "${reused:-0}" -gt "${run1:-0}"
finish
