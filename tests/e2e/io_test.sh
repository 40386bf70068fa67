# io_test.sh - files and streams a hostile or careless user hands pooled (issue 9, items 3-7
# and 10): outputs are written through a temporary file renamed over the target (never a
# device, a FIFO or a folder; an interrupted write keeps the old file); inputs are regular
# files within a stated size limit, refused before anything blocks; text with a NUL byte is
# refused; a write error on standard output is an error whatever the command.
. tests/e2e/lib.sh
M=$SHARED/models/stories260K.gguf
Q=$SHARED/fixtures/hf/qwen3_realtok/qwen3_realtok-q8_0.gguf
SYN=(synth --preset smollm2-135m --layers 1)
# last_is DESCRIPTION PATTERN: the command before failed, and its last stderr line matches
last_is() {
    if [ "$rc" -ne 0 ] && [ "$rc" -lt 124 ] && tail -n 1 "$TMP/err" | grep -q -- "$2"; then pass
    else fail "$1 (exit $rc: $(tail -n 1 "$TMP/err" | head -c 300))"; fi
}
no_temp_left() { check "$1: no temporary file left" [ -z "$(ls -A "$TMP/w" | grep '^\.')" ]; }
mkdir -p "$TMP/w"
W=$TMP/w
# bound the memory of the commands that used to read /dev/zero without end (not under ASan,
# which reserves terabytes of address space)
limit_memory() { grep -qa __asan_init "$POOLED" || ulimit -v 2000000; }

# --- item 3: a target that is not a regular file is refused, never removed -------------
ln -s /dev/full "$W/full"
mkfifo "$W/fifo"
mkdir "$W/dir"
for t in full fifo dir; do
    timeout 20 "$POOLED" quantize "$M" "$W/$t" f16 >"$TMP/out" 2>"$TMP/err"; rc=$?
    last_is "quantize to $t: refused" "not a regular file"
    timeout 20 "$POOLED" "${SYN[@]}" -o "$W/$t" >"$TMP/out" 2>"$TMP/err"; rc=$?
    last_is "synth -o $t: refused" "not a regular file"
done
check "the link to /dev/full is still there" [ -L "$W/full" ]
check "the FIFO is still there" [ -p "$W/fifo" ]
check "the folder is still there" [ -d "$W/dir" ]
check_err "an output folder that does not exist: one line" "$POOLED" quantize "$M" "$W/none/x.gguf" f16
check "it says why" grep -q "cannot create temporary file in $W/none: No such file or directory" "$TMP/err"
no_temp_left "refusals"

# --- item 4: temporary file + rename; an interrupted write keeps the old file -----------
printf 'old contents\n' >"$W/old.gguf"
(ulimit -f 256; "$POOLED" "${SYN[@]}" -o "$W/old.gguf" >"$TMP/out" 2>"$TMP/err"); rc=$?
last_is "synth past the file size limit: one error line" "File too large"
check "synth: the old file is intact" [ "$(cat "$W/old.gguf")" = "old contents" ]
(ulimit -f 256; "$POOLED" quantize "$M" "$W/old.gguf" f32 >"$TMP/out" 2>"$TMP/err"); rc=$?
last_is "quantize past the file size limit: one error line" "File too large"
check "quantize: the old file is intact" [ "$(cat "$W/old.gguf")" = "old contents" ]
# killed (SIGTERM, as Ctrl-C's SIGINT) part-way: the temporary file goes, the old file stays
"$POOLED" synth --preset qwen3-0.6b --layers 2 -o "$W/old.gguf" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 200); do ls -A "$W" | grep -q '^\.old\.gguf\.' && break; sleep 0.05; done
kill -TERM $pid; wait $pid; rc=$?
check "synth killed part-way: died of the signal (exit $rc)" [ $rc -eq 143 ]
check "synth killed part-way: the old file is intact" [ "$(cat "$W/old.gguf")" = "old contents" ]
no_temp_left "interrupted writes"
# the target is replaced by a new file (a process that maps the old one keeps its bytes),
# keeping its mode; through a symbolic link the file it points to is replaced
chmod 640 "$W/old.gguf"
ino=$(stat -c %i "$W/old.gguf")
"$POOLED" quantize "$M" "$W/old.gguf" f32 2>"$TMP/err"
check "quantize over an existing file" [ $? -eq 0 ]
check "a new inode, not the old file rewritten in place" [ "$(stat -c %i "$W/old.gguf")" != "$ino" ]
check "the mode is kept" [ "$(stat -c %a "$W/old.gguf")" = 640 ]
check "the new file is a model" "$POOLED" info "$W/old.gguf" >/dev/null
ln -s old.gguf "$W/link.gguf"
"$POOLED" quantize "$M" "$W/link.gguf" f16 2>"$TMP/err"
check "through a link: the link stays a link" [ -L "$W/link.gguf" ]
check "through a link: its file is written" "$POOLED" info "$W/old.gguf" --json >"$TMP/out"
check "through a link: as f16" grep -q '"general.file_type"' "$TMP/out"
no_temp_left "successful writes"
# an output that is the input, by any name, is refused and left alone
cp "$M" "$W/s.gguf"
ln -s s.gguf "$W/s-link.gguf"
ln "$W/s.gguf" "$W/s-hard.gguf"
for out in "$W/s.gguf" "$W/s-link.gguf" "$W/s-hard.gguf" "$W/../w/./s.gguf"; do
    check_err "synth --vocab-from s.gguf -o $out: refused" "$POOLED" "${SYN[@]}" --vocab-from "$W/s.gguf" -o "$out"
    check_err "quantize s.gguf $out: refused" "$POOLED" quantize "$W/s.gguf" "$out" f16
done
check_err "synth --vocab-from link -o s.gguf: refused" "$POOLED" "${SYN[@]}" --vocab-from "$W/s-link.gguf" -o "$W/s.gguf"
check "the input is unchanged" cmp -s "$W/s.gguf" "$M"

# --- items 5 and 6: inputs are regular files within a limit, refused before blocking ----
printf '[{"role": "user", "content": "hi"}]' >"$W/conv.json"
for f in "$W/fifo" /dev/zero /dev/urandom "$W/dir"; do
    for cmd in "info $f" "run -m $f -p x -n 1" "tokenize -m $f x" "template -m $f --messages $W/conv.json" \
        "template -m $Q --messages $f" "template -m $Q --messages $W/conv.json --tools $f" \
        "template -m $Q --messages $W/conv.json --template $f" "tokenize -m $M --file $f" \
        "tokenize -m $M --bench 1 --file $f" "quantize $f $W/q.gguf f16" \
        "${SYN[*]} --vocab-from $f -o $W/q.gguf"; do
        (limit_memory; timeout 20 "$POOLED" $cmd >"$TMP/out" 2>"$TMP/err"); rc=$?
        last_is "$cmd: refused" "not a regular file"
    done
done
truncate -s 65M "$W/big.json"
truncate -s 1025K "$W/big.jinja"
truncate -s 257M "$W/big.txt"
check_err "--messages over 64 MiB" "$POOLED" template -m "$Q" --messages "$W/big.json"
check "it names the limit" grep -q "larger than the limit of 64 MiB" "$TMP/err"
check_err "--tools over 64 MiB" "$POOLED" template -m "$Q" --messages "$W/conv.json" --tools "$W/big.json"
check "it names the limit" grep -q "larger than the limit of 64 MiB" "$TMP/err"
check_err "--template over 1 MiB" "$POOLED" template -m "$Q" --messages "$W/conv.json" --template "$W/big.jinja"
check "it names the limit" grep -q "larger than the limit of 1 MiB" "$TMP/err"
check_err "tokenize --file over 256 MiB" timeout 60 "$POOLED" tokenize -m "$M" --file "$W/big.txt"
check "it names the limit" grep -q "larger than the limit of 256 MiB" "$TMP/err"
check_err "tokenize --bench past 256 MB" timeout 60 "$POOLED" tokenize -m "$M" --bench 257
check "it names the bound" grep -q "256" "$TMP/err"
rm -f "$W"/big.*
# chat: each input line is bounded (1 MiB); past it the chat ends with status 1
(limit_memory; timeout 60 "$POOLED" chat -m "$Q" --temp 0 -n 2 </dev/zero >"$TMP/out" 2>"$TMP/err"); rc=$?
last_is "chat < /dev/zero: ends with an error" "longer than the limit of 1 MiB"
head -c 1100000 /dev/zero | tr '\0' a >"$W/long.txt"; echo >>"$W/long.txt"
(limit_memory; timeout 60 "$POOLED" chat -m "$Q" --temp 0 -n 2 <"$W/long.txt" >"$TMP/out" 2>"$TMP/err"); rc=$?
last_is "chat with a 1.1 MB line: ends with an error" "longer than the limit of 1 MiB"
check "no reply was made to it" [ ! -s "$TMP/out" ]

# --- item 7 (files and lines): a NUL byte in text is refused, not cut silently ----------
printf 'Hello\0 world' >"$W/nul.txt"
check_err "tokenize --file with a NUL byte" "$POOLED" tokenize -m "$M" --file "$W/nul.txt"
check "it says so" grep -q "NUL byte" "$TMP/err"
printf '{{ "a" }}\0{{ "b" }}' >"$W/nul.jinja"
check_err "--template with a NUL byte" "$POOLED" template -m "$Q" --messages "$W/conv.json" --template "$W/nul.jinja"
check "it says so" grep -q "NUL byte" "$TMP/err"
printf '[{"role": "user", "content": "hi"}]\0' >"$W/nul.json"
check_err "--messages with a NUL byte" "$POOLED" template -m "$Q" --messages "$W/nul.json"
printf 'Hello\0 there\n' | "$POOLED" chat -m "$Q" --temp 0 -n 2 >"$TMP/out" 2>"$TMP/err"; rc=$?
last_is "a chat line with a NUL byte: refused" "NUL byte"

# --- item 10: write errors on standard output --------------------------------------------
printf 'Hello\n' >"$W/hello.txt"
for cmd in "run -m $M -p Once -n 4 --temp 0" "run -m $M -p Once -n 4 --temp 0 --ids" \
    "tokenize -m $M hello" "tokenize -m $M --pieces hello" "template -m $Q --messages $W/conv.json" \
    "template -m $Q --messages $W/conv.json --ids" "bench -m $M -p 4 -n 2 -r 1" \
    "bench -m $M -p 4 -n 2 -r 1 --json" "info $M" "info $M --json" "${SYN[*]} -o $W/ok.gguf" \
    "tokenize -m $M --bench 1" "run --help" "--help"; do
    timeout 60 "$POOLED" $cmd >/dev/full 2>"$TMP/err"; rc=$?
    last_is "$cmd >/dev/full" "pooled: writing standard output: No space left on device"
    timeout 60 "$POOLED" $cmd >&- 2>"$TMP/err"; rc=$?
    last_is "$cmd >&-" "pooled: writing standard output: Bad file descriptor"
done
timeout 60 "$POOLED" chat -m "$Q" --temp 0 -n 2 <"$W/hello.txt" >/dev/full 2>"$TMP/err"; rc=$?
last_is "chat >/dev/full" "pooled: writing standard output: No space left on device"
timeout 60 "$POOLED" chat -m "$Q" --temp 0 -n 2 <"$W/hello.txt" >&- 2>"$TMP/err"; rc=$?
last_is "chat >&-" "pooled: writing standard output: Bad file descriptor"
# a reader that goes away: with SIGPIPE as inherited (default) pooled ends at its next
# write, quietly; with SIGPIPE ignored generation stops with status 1 and one line
timeout 60 "$POOLED" run -m "$M" -p Once -n 400 --temp 0 --ignore-eos 2>"$TMP/err" | head -c1 >/dev/null
rc=${PIPESTATUS[0]}
check "run | head -c1 ends (exit $rc)" [ "$rc" -ne 124 ]
(trap '' PIPE; timeout 60 "$POOLED" run -m "$M" -p Once -n 400 --temp 0 --ignore-eos 2>"$TMP/err" |
    head -c1 >/dev/null; exit "${PIPESTATUS[0]}"); rc=$?
last_is "run | head -c1 with SIGPIPE ignored" "pooled: writing standard output: Broken pipe"
check "it stopped generating" [ -z "$(grep 'generated 399 ' "$TMP/err")" ]
# "-" reads standard input (a pipe), under the same limits
out=$(echo '[{"role":"user","content":"hi"}]' | "$POOLED" template -m "$Q" --messages - 2>"$TMP/err")
check "template --messages - reads standard input" grep -q "hi" <<<"$out"
check "tokenize --file - reads standard input" [ "$(echo "Hello world" | "$POOLED" tokenize -m "$M" --file - 2>/dev/null)" = "1 346 306 414 263 304 341 13" ]
check_err "template --messages - from an endless stream stops at the limit" \
    bash -c "head -c 80000000 /dev/zero | '$POOLED' template -m '$Q' --messages -"
check "the limit is named" grep -q "limit of 64 MiB" "$TMP/err"
finish
