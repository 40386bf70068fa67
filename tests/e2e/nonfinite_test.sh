# nonfinite_test.sh - models with NaN/Inf weights (a copy of a fixture with one value
# overwritten): a warning at load naming the tensor, an error (non-zero exit, never an id
# made up from NaN) when the logits are not finite, on the CPU and on the WebGPU backend
# (lavapipe in CI), greedy (argmax on the device), sampled (device top-k) and with every
# logit read back; `quantize` refuses them.
. tests/e2e/lib.sh
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
M=$SHARED/models
# poison SRC DST TENSOR BYTES: DST is SRC with the tensor's first bytes replaced (printf format)
poison() {
    cp "$1" "$2" && chmod u+w "$2" || return 1
    local off
    off=$("$POOLED" info "$2" --json | jq --arg t "$3" '.data_offset + (.tensors[] | select(.name == $t) | .offset)')
    printf "$4" | dd of="$2" bs=1 seek="$off" conv=notrunc status=none
}
NAN32='\x00\x00\xc0\x7f' INF32='\x00\x00\x80\x7f' NAN16='\x00\x7e'
poison "$M/stories260K.gguf" "$TMP/nan.gguf" blk.0.ffn_up.weight "$NAN32"
poison "$M/stories260K.gguf" "$TMP/inf.gguf" blk.0.attn_norm.weight "$INF32"
poison "$M/stories260K-Q4_0.gguf" "$TMP/q4.gguf" token_embd.weight "$NAN16"
# a chat model (synthetic qwen3 with a ChatML template), f16 weights
"$POOLED" synth --preset qwen3-0.6b --layers 1 --vocab 300 -o "$TMP/chat-ok.gguf" >/dev/null 2>&1
poison "$TMP/chat-ok.gguf" "$TMP/chat.gguf" blk.0.ffn_up.weight "$NAN16"

# expect_nonfinite DESC ARGS...: exit 1, the error line last, nothing on stdout but a newline
expect_nonfinite() {
    local d=$1; shift
    "$POOLED" "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
    if [ $rc -eq 1 ] && tail -1 "$TMP/err" | grep -q "^pooled: the model produced non-finite logits at position [0-9]" &&
        [ -z "$(tr -d '\n' <"$TMP/out")" ] && ! grep -q Sanitizer "$TMP/err"; then pass
    else fail "$d (exit $rc: $(tail -2 "$TMP/err" | head -c 300); stdout '$(head -c 100 "$TMP/out")')"; fi
}
for be in cpu webgpu; do
    for m in nan inf; do
        for opts in "--temp 0" "--seed 1" "--seed 1 --top-k 0" "--temp 0 --repeat-penalty 1.3"; do
            expect_nonfinite "$m on $be, $opts" run -m "$TMP/$m.gguf" -p "Once upon" -n 4 --backend $be $opts
        done
        expect_nonfinite "$m on $be, --ids" run -m "$TMP/$m.gguf" -p "Once upon" -n 4 --backend $be --temp 0 --ids
    done
    "$POOLED" run -m "$TMP/nan.gguf" -p "Once" -n 2 --backend $be >/dev/null 2>"$TMP/err"
    check "$be: the load warns and names the tensor" \
        grep -q "^pooled: warning: .*nan.gguf: tensor blk.0.ffn_up.weight holds NaN or Inf" "$TMP/err"
    check "$be: the warning comes before the output" sh -c "head -1 '$TMP/err' | grep -q warning"
    echo hello | "$POOLED" chat -m "$TMP/chat.gguf" --backend $be --temp 0 >/dev/null 2>"$TMP/err"
    check "chat on $be: a turn with non-finite logits ends the chat with status 1" \
        sh -c "[ $? -eq 1 ] && tail -1 '$TMP/err' | grep -q 'non-finite logits at position'"
    check_err "bench on $be" sh -c "'$POOLED' bench -m '$TMP/nan.gguf' --backend $be -p 4 -n 4 -r 1 2>&1 >/dev/null | grep -v '^loaded\|warning' >&2; exit 1"
    "$POOLED" bench -m "$TMP/nan.gguf" --backend $be -p 4 -n 4 -r 1 >/dev/null 2>"$TMP/err"
    check "bench on $be fails on non-finite logits" sh -c "[ $? -eq 1 ] && grep -q 'non-finite' '$TMP/err'"
done
"$POOLED" run -m "$TMP/q4.gguf" -p "Once" -n 2 --backend cpu >/dev/null 2>"$TMP/err"
check "a NaN block scale of a q4_0 tensor is found" grep -q "tensor token_embd.weight holds NaN" "$TMP/err"
"$POOLED" run -m "$M/stories260K.gguf" -p "Once" -n 2 --backend cpu >/dev/null 2>"$TMP/err"
check "a clean model: no warning" sh -c "! grep -q 'warning' '$TMP/err'"

for m in nan inf q4; do
    for t in q8_0 f16 q4_k; do
        check_err "quantize $m to $t is refused" "$POOLED" quantize "$TMP/$m.gguf" "$TMP/out-$m.gguf" $t
        check "the line names the tensor ($m, $t)" grep -q "tensor .*weight holds NaN or Inf values" "$TMP/err"
        check "nothing written ($m, $t)" [ ! -e "$TMP/out-$m.gguf" ]
    done
done
# finite f32 weights too large for f16 (100000 > 65504) would become Inf: refused too
poison "$M/stories260K.gguf" "$TMP/big.gguf" blk.1.ffn_up.weight '\x00\x50\xc3\x47'
check_err "quantize to f16 with values beyond f16's range" "$POOLED" quantize "$TMP/big.gguf" "$TMP/out-big.gguf" f16
check "... names the tensor and the type, whole" grep -q "^pooled: blk.1.ffn_up.weight: values too large for f16 (they would become Inf)$" "$TMP/err"
check "... nothing written" [ ! -e "$TMP/out-big.gguf" ]
check "... q8_0 holds them" "$POOLED" quantize "$TMP/big.gguf" "$TMP/out-big.gguf" q8_0
finish
