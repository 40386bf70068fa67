# option_errors_test.sh - bad options and impossible sizes get one clear line naming the
# right thing (issue 9, item 11), and the prompt's timing is its own (item 12): contexts
# whose KV cache exceeds the GPU's largest buffer or the machine's memory are refused at
# load; bench names the --ctx given; a file error names its path once; --backend errors do
# not blame the model; --prompt-ids names the whole bad item; numbers with junk, spaces,
# signs or out of range are refused; a model without a chat template does not say
# "chat:"; a --system text or first message that cannot fit does not advise /reset.
. tests/e2e/lib.sh
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
M=$SHARED/models/stories260K.gguf
# 4 layers of qwen3-0.6b's shapes: 16 KiB of f16 KV cache per token, 1 GiB per layer at 64K
"$POOLED" synth --preset qwen3-0.6b --layers 4 --vocab 300 -o "$TMP/q.gguf" >/dev/null 2>&1
has() { grep -q -- "$1" "$TMP/err"; }
hasnt() { ! grep -q -- "$1" "$TMP/err"; }

# --- sizes checked at load, before any prompt runs
check_err "webgpu --ctx 16777216" "$POOLED" run -m "$TMP/q.gguf" -p hi -n 1 --backend webgpu --ctx 16777216
check "... says the KV cache exceeds the device's largest buffer" has "KV cache per layer, more than the webgpu device's largest buffer of .* MiB (--ctx [0-9]* at most)"
check_err "webgpu: a batch beyond the device's buffers" "$POOLED" bench -m "$TMP/q.gguf" -p 1048576 -n 0 -r 1 --backend webgpu
check "... names the device's largest buffer" has "more than the webgpu device's largest buffer"
check_err "cpu --ctx 16777216 (256 GiB of cache)" "$POOLED" run -m "$TMP/q.gguf" -p hi -n 1 --backend cpu --ctx 16777216
check "... says the machine's memory is too small" has "needs 256.0 GiB of KV cache, more than the .* GiB of this machine's memory"

# --- the numbers an error quotes are the ones given
check_err "bench --ctx 512 -p 600" "$POOLED" bench -m "$M" --ctx 512 -p 600 --backend cpu
check "... quotes --ctx 512" has "bench: --ctx 512 is smaller than the 600 ids"

# --- who is to blame
check_err "a missing model file" "$POOLED" run -m "$TMP/none.gguf" -p hi
check "... names the path once" [ "$(grep -o "none.gguf" "$TMP/err" | wc -l)" -eq 1 ]
check_err "--backend cuda" "$POOLED" run -m "$M" -p hi --backend cuda
check "... names --backend, not the model" sh -c "grep -q -- '--backend' '$TMP/err' && ! grep -q stories '$TMP/err'"
POOLED_DAWN=$TMP/none.so check_err "webgpu without Dawn" "$POOLED" run -m "$M" -p hi --backend webgpu
check "... blames the backend, not the model" sh -c "grep -q -- '--backend webgpu: ' '$TMP/err' && ! grep -q stories '$TMP/err'"

# --- --prompt-ids: the whole bad item
for bad in "1 2.5" "1,7x" "3 -1" "+4" "99999999999" "1 2 0x10"; do
    check_err "--prompt-ids '$bad'" "$POOLED" run -m "$M" --prompt-ids "$bad" -n 1 --backend cpu
    item=${bad##*[ ,]}
    check "... quotes '$item' whole" has "--prompt-ids: '$item' is not a token id"
done
check_err "--prompt-ids ' , '" "$POOLED" run -m "$M" --prompt-ids " , " -n 1
check "... says no ids" has "no ids given"
check_err "--prompt-ids beyond the vocabulary" "$POOLED" run -m "$M" --prompt-ids "1 512" -n 1 --backend cpu
check "... names the option and the range" has "--prompt-ids: id 512 is outside the vocabulary (0 to 511)"

# --- numbers: junk, spaces, signs, range, missing values, for every command that takes them
for args in "run --ctx 5x" "run --ctx ' 5'" "run --ctx 0" "run --ctx 99999999999999999999" \
    "run -n -5" "run -n 1.5" "run --temp nan" "run --temp '1 '" "run --seed -1" "run -t 1e3" \
    "run --top-p 0" "run --ctx" "chat -n -2" "chat --kv f8" "bench -p 5x" "bench -r 0" \
    "bench -n -1" "synth --layers 0" "synth --vocab 1x" "tokenize --bench 5000" \
    "run --backend=cuda" "run --ctx=" "run --act q4"; do
    eval "set -- $args"
    check_err "pooled $args" "$POOLED" "$@" -m "$M" -p hi
    check "pooled $args: names the option" sh -c "grep -q -- '${2%%=*}' '$TMP/err'"
done

# --kv q8 on a model whose cache rows are not whole 32-value blocks (8 values a row)
check_err "--kv q8 on 8-value cache rows" "$POOLED" run -m "$SHARED/models/llama-2-tiny-random.gguf" \
    -p hi -n 1 --kv q8 --backend cpu
check "... says why and what to use" has "32-value blocks (this one's hold 8 values): use an f16"

# --- templates: no "chat:" prefix, and /reset only when it can help
echo '[{"role": "user", "content": "hi"}]' >"$TMP/m.json"
check_err "template on a model without a template" "$POOLED" template -m "$M" --messages "$TMP/m.json"
check "... says so without 'chat:'" sh -c "grep -q 'no chat template' '$TMP/err' && ! grep -q 'chat:' '$TMP/err'"
long=$(printf 'word %.0s' $(seq 60))
check_err "chat --system longer than the context" "$POOLED" chat -m "$TMP/q.gguf" --ctx 32 --system "$long" --backend cpu </dev/null
check "... says to shorten it or raise --ctx, not /reset" sh -c "grep -q -- '--system: .*raise --ctx' '$TMP/err' && ! grep -q reset '$TMP/err'"
echo "$long" | "$POOLED" chat -m "$TMP/q.gguf" --ctx 32 --backend cpu --temp 0 >/dev/null 2>"$TMP/err"
check "chat: a first message that cannot fit says raise --ctx, not /reset" sh -c "grep -q 'raise --ctx' '$TMP/err' && ! grep -q reset '$TMP/err'"
printf 'hi\n%s\n' "$long" | "$POOLED" chat -m "$TMP/q.gguf" --ctx 64 -n 2 --backend cpu --temp 0 >/dev/null 2>"$TMP/err"
check "chat: a later message that cannot fit advises /reset" grep -q "/reset to start over" "$TMP/err"

# --- item 12: the prompt is timed until the GPU finished it
P="Once upon a time there was a little girl who lived in a village near the forest. She liked to play"
"$POOLED" run -m "$M" -p "$P" -n 4 --temp 0 --backend webgpu >/dev/null 2>"$TMP/err"
ms=$(sed -n 's/^prompt [0-9]* tokens ([0-9]* run) in \([0-9.]*\) ms.*/\1/p' "$TMP/err")
check "webgpu run: the prompt takes time ($ms ms; stderr: $(tail -c 400 "$TMP/err" | tr '\n' ' '))" awk -v t="${ms:-0}" 'BEGIN { exit !(t > 0.05) }'
tps=$(sed -n 's/^prompt .* ms, \([0-9.]*\) tok\/s.*/\1/p' "$TMP/err")
check "webgpu run: prompt speed is plausible ($tps tok/s)" awk -v t="${tps:-1e9}" 'BEGIN { exit !(t < 1e6) }'
echo "$P" | "$POOLED" chat -m "$TMP/q.gguf" -n 2 --timings --temp 0 --backend webgpu >/dev/null 2>"$TMP/err"
ms=$(sed -n 's/^turn 1: [0-9]* prompt ids run ([0-9]* reused) in \([0-9.]*\) ms.*/\1/p' "$TMP/err")
check "webgpu chat --timings: the prompt takes time ($ms ms)" awk -v t="${ms:-0}" 'BEGIN { exit !(t > 0.05) }'
finish
