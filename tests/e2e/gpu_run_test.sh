# gpu_run_test.sh - `pooled run` and `pooled bench` on the WebGPU backend (lavapipe in CI):
# greedy ids of stories260K equal llama.cpp's, bench reports decode speed and weight
# bandwidth, and an explicit --backend webgpu never falls back to the CPU.
. tests/e2e/lib.sh
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
FIX=$SHARED/fixtures/llamacpp-b10573
want_ids() {
    awk -v f="\"$1\": {" 'index($0, f) { on = 1 } on && /"generated_ids"/ { print; exit }' \
        "$FIX/greedy_once_upon_a_time.json" | sed 's/.*\[//; s/\].*//; s/,//g'
}
for f in stories260K.gguf stories260K-Q4_0.gguf; do
    want=$(want_ids "$f")
    got=$("$POOLED" run -m "$SHARED/models/$f" -p "Once upon a time" -n 64 --temp 0 --ids \
        --backend webgpu 2>"$TMP/err")
    check "$f on webgpu: llama.cpp's 64 greedy ids ($(head -c 200 "$TMP/err"))" [ "$(echo $got)" = "$(echo $want)" ]
    check "$f on webgpu: the device is named" grep -q "webgpu" "$TMP/err"
done
out=$("$POOLED" bench -m "$SHARED/models/stories260K-Q8_0.gguf" --backend webgpu -p 4 -n 8 -r 1 --json 2>&1)
check "bench on webgpu reports decode speed" sh -c "echo '$out' | tail -1 | jq -e '.decode_tok_s > 0 and .decode_weight_gb_s > 0 and .backend == \"webgpu\"' >/dev/null"
check "bench prints the weights read per token and their bandwidth" sh -c "echo '$out' | grep -q 'MB read per token (file .* MB), .* GB/s in decode'"
POOLED_DAWN=/nonexistent/lib.so check_err "webgpu without Dawn: one line, no fallback" \
    "$POOLED" run -m "$SHARED/models/stories260K.gguf" -p "Once" -n 2 --backend webgpu
check "the line says why" grep -q "Dawn library not found" "$TMP/err"
# the prefill GEMM's tile (POOLED_GPU_GEMM): a bad one is refused when the backend opens
for v in abc 63,64,4,4,4 64,64,4,4,9; do
    POOLED_GPU_GEMM=$v check_err "POOLED_GPU_GEMM=$v: one line" \
        "$POOLED" run -m "$SHARED/models/stories260K-Q4_0.gguf" -p "Once" -n 2 --backend webgpu
    check "... naming POOLED_GPU_GEMM" grep -q "POOLED_GPU_GEMM" "$TMP/err"
done
# decode's GEMVs over x quantised once by a pre-pass (POOLED_GPU_XPRE): llama.cpp's ids
# still, and on the hybrid (its four DeltaNet projections in one sweep) the default's ids
# (0: never; the default, auto, takes none of these small models' GEMVs)
want=$(want_ids stories260K-Q4_0.gguf)
Q35=$SHARED/fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf
base=$("$POOLED" run -m "$Q35" -p "Hello there" -n 12 --temp 0 --ids --backend webgpu 2>/dev/null)
for x in 0 1 2; do
    got=$(POOLED_GPU_XPRE=$x "$POOLED" run -m "$SHARED/models/stories260K-Q4_0.gguf" \
        -p "Once upon a time" -n 64 --temp 0 --ids --backend webgpu 2>"$TMP/err")
    check "POOLED_GPU_XPRE=$x: llama.cpp's 64 greedy ids" [ "$(echo $got)" = "$(echo $want)" ]
    got=$(POOLED_GPU_XPRE=$x "$POOLED" run -m "$Q35" -p "Hello there" -n 12 --temp 0 --ids \
        --backend webgpu 2>/dev/null)
    check "POOLED_GPU_XPRE=$x: qwen3_5 ids as without ($base)" [ -n "$base" -a "$got" = "$base" ]
done
POOLED_GPU_XPRE=7 check_err "POOLED_GPU_XPRE=7: one line" \
    "$POOLED" run -m "$SHARED/models/stories260K-Q4_0.gguf" -p "Once" -n 2 --backend webgpu
check "... naming POOLED_GPU_XPRE" grep -q "POOLED_GPU_XPRE" "$TMP/err"
# bench --streams on webgpu: the batched step of 2 sessions appends every step's ids
# (the ids themselves are checked on the CPU, bench_streams_test.sh: the GPU's batched
# step is within 1e-5 of the plain one, not bit-identical)
out=$("$POOLED" bench -m "$SHARED/models/stories260K-Q8_0.gguf" --backend webgpu -p 4 -n 4 -r 1 \
    --streams 1,2 --json 2>/dev/null | tail -1)
streams_ok() {
    [ -n "$out" ] && jq -e '.backend == "webgpu" and .streams_batched and
        [.streams[].ids_appended] == [4, 8] and all(.streams[]; .tok_s > 0)' <<<"$out" >/dev/null
}
check "bench --streams 1,2 on webgpu: batched, 4 ids a stream ($(head -c 300 <<<"$out"))" streams_ok
# the MoE's switches (POOLED_GPU_TOPK, _MOESH, _MOECOMB; all on by default, whose ids
# gpu_model_test checks): all off, the qwen3.5 MoE fixture's greedy ids are the CPU's (f32
# cache: with f16 the GPU parts from the CPU at the 11th id, with the switches on or off,
# gpu-notes.md); a bad value is refused with one line
QM=$SHARED/fixtures/hf/qwen3_5_moe/qwen3_5_moe-q8_0.gguf
base=$("$POOLED" run -m "$QM" -p "Hello there" -n 12 --temp 0 --ids --kv f32 --backend cpu \
    2>/dev/null)
got=$(POOLED_GPU_TOPK=0 POOLED_GPU_MOESH=0 POOLED_GPU_MOECOMB=0 "$POOLED" run -m "$QM" \
    -p "Hello there" -n 12 --temp 0 --ids --kv f32 --backend webgpu 2>/dev/null)
check "MoE switches off: qwen3_5_moe ids as the CPU's ($base)" [ -n "$base" -a "$got" = "$base" ]
for v in TOPK MOESH MOECOMB; do
    check_err "POOLED_GPU_$v=2: one line" \
        env POOLED_GPU_$v=2 "$POOLED" run -m "$QM" -p "Once" -n 2 --backend webgpu
    check "... naming POOLED_GPU_$v" grep -q "POOLED_GPU_$v" "$TMP/err"
done
# the prefill attention kernel (POOLED_GPU_FA; auto leaves lavapipe on the decode kernel,
# 1 forces it): a prompt of more than 16 tokens gives the CPU's greedy ids; a bad value is
# refused with one line
P="Once upon a time there was a little girl named Lily. She loved to play outside in the park with her friends."
base=$("$POOLED" run -m "$SHARED/models/stories260K.gguf" -p "$P" -n 16 --temp 0 --ids --kv f32 \
    --backend cpu 2>/dev/null)
got=$(POOLED_GPU_FA=1 "$POOLED" run -m "$SHARED/models/stories260K.gguf" -p "$P" -n 16 --temp 0 \
    --ids --kv f32 --backend webgpu 2>"$TMP/err")
check "POOLED_GPU_FA=1: stories260K ids as the CPU's ($base; $(head -c 200 "$TMP/err"))" \
    [ -n "$base" -a "$got" = "$base" ]
POOLED_GPU_FA=2 check_err "POOLED_GPU_FA=2: one line" \
    "$POOLED" run -m "$SHARED/models/stories260K.gguf" -p "Once" -n 2 --backend webgpu
check "... naming POOLED_GPU_FA" grep -q "POOLED_GPU_FA" "$TMP/err"
# the delta rule over a prompt of more than 16 tokens token by token (POOLED_GPU_DR=0; the
# default, staged chunks, is gpu_model_test's): the qwen3.5 fixture's greedy ids are the
# CPU's; a bad value is refused with one line
P35="Once upon a time there was a little girl who lived in a small house near the big forest"
base=$("$POOLED" run -m "$Q35" -p "$P35" -n 4 --temp 0 --ids --kv f32 --backend cpu 2>/dev/null)
got=$(POOLED_GPU_DR=0 "$POOLED" run -m "$Q35" -p "$P35" -n 4 --temp 0 --ids --kv f32 \
    --backend webgpu 2>"$TMP/err")
check "POOLED_GPU_DR=0: qwen3_5 ids over a long prompt as the CPU's ($base)" \
    [ -n "$base" -a "$got" = "$base" ]
check "... a prompt of more than 16 tokens" \
    awk '/^prompt [0-9]+ tokens/ { ok = $2 > 16 } END { exit !ok }' "$TMP/err"
check_err "POOLED_GPU_DR=2: one line" \
    env POOLED_GPU_DR=2 "$POOLED" run -m "$Q35" -p "Once" -n 2 --backend webgpu
check "... naming POOLED_GPU_DR" grep -q "POOLED_GPU_DR" "$TMP/err"
for bad in 0 x 8x -3; do
    check_err "POOLED_GPU_GEMM_MIN=$bad: one line" \
        env POOLED_GPU_GEMM_MIN=$bad "$POOLED" run -m "$SHARED/models/stories260K.gguf" \
        -p "Once" -n 2 --backend webgpu
    check "... naming POOLED_GPU_GEMM_MIN" grep -q "POOLED_GPU_GEMM_MIN" "$TMP/err"
done
for bad in 1 x 8x -3 4,-1; do
    check_err "POOLED_GPU_EXACT=$bad: one line" \
        env POOLED_GPU_EXACT=$bad "$POOLED" run -m "$SHARED/models/stories260K.gguf" \
        -p "Once" -n 2 --backend webgpu
    check "... naming POOLED_GPU_EXACT" grep -q "POOLED_GPU_EXACT" "$TMP/err"
done
# a 24-token prompt with quantised activations goes through the GEMM in bench
out=$("$POOLED" bench -m "$SHARED/models/stories260K-Q4_0.gguf" --backend webgpu -p 24 -n 2 -r 1 --json 2>&1)
check "bench -p 24 on webgpu through the GEMM" sh -c "echo '$out' | tail -1 | jq -e '.prefill_tok_s > 0' >/dev/null"
# a fixed tile the open's check takes (Q4_0) but a Q8_0 gate/up cannot (version 8 stages 16
# weight words a thread there, at most 8): that matmul takes the GEMV, the prompt runs
out=$(POOLED_GPU_GEMM=16,16,4,4,4,8 "$POOLED" bench -m "$SHARED/models/stories260K-Q8_0.gguf" \
    --backend webgpu -p 24 -n 2 -r 1 --json 2>&1)
check "POOLED_GPU_GEMM=16,16,4,4,4,8 on a Q8_0 gate/up: the GEMV instead ($(echo "$out" | tail -1 | head -c 200))" \
    sh -c "echo '$out' | tail -1 | jq -e '.prefill_tok_s > 0' >/dev/null"
finish
