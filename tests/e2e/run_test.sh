# run_test.sh - `pooled run` end to end on stories260K (F32, Q8_0, Q4_0): the 64 greedy ids
# and the text llama.cpp b10573 produced for "Once upon a time", stdout holding only the
# continuation, seeded sampling reproducible, and the --backend choices.
. tests/e2e/lib.sh
FIX=$SHARED/fixtures/llamacpp-b10573

# the generated_ids array that follows "FILE": { in the fixture, space separated
want_ids() {
    awk -v f="\"$1\": {" 'index($0, f) { on = 1 } on && /"generated_ids"/ { print; exit }' \
        "$FIX/greedy_once_upon_a_time.json" | sed 's/.*\[//; s/\].*//; s/,//g'
}

for f in stories260K.gguf stories260K-Q8_0.gguf stories260K-Q4_0.gguf; do
    want=$(want_ids "$f")
    got=$("$POOLED" run -m "$SHARED/models/$f" -p "Once upon a time" -n 64 --temp 0 --ids 2>"$TMP/err")
    check "$f: 64 greedy ids equal llama.cpp's" [ -n "$want" -a "$got" = "$want" ]
    check "$f: report on stderr" grep -q "^loaded llama" "$TMP/err"
    # both activation modes (q8 is the default above): llama.cpp's ids hold for these files
    got=$("$POOLED" run -m "$SHARED/models/$f" -p "Once upon a time" -n 64 --temp 0 --ids --act f32 2>/dev/null)
    check "$f --act f32: 64 greedy ids equal llama.cpp's" [ -n "$want" -a "$got" = "$want" ]
done
check_err "bad --act value" "$POOLED" run -m "$SHARED/models/stories260K.gguf" -p "x" --act q4

# text: llama.cpp's completion file is the prompt (with SPM's leading space) + continuation
"$POOLED" run -m "$SHARED/models/stories260K.gguf" -p "Once upon a time" -n 64 --temp 0 \
    >"$TMP/text" 2>/dev/null
check "text continuation equals llama.cpp's completion" \
    cmp -s <(printf ' Once upon a time'; cat "$TMP/text"; printf '\n\n') "$FIX/completion_stories260K.txt"

# seeded sampling: same seed, same text; stdout has nothing but the ids line
a=$("$POOLED" run -m "$SHARED/models/stories260K.gguf" -p "Once upon a time" -n 40 --temp 0.9 --seed 7 --ids 2>/dev/null)
b=$("$POOLED" run -m "$SHARED/models/stories260K.gguf" -p "Once upon a time" -n 40 --temp 0.9 --seed 7 --ids 2>/dev/null)
c=$("$POOLED" run -m "$SHARED/models/stories260K.gguf" -p "Once upon a time" -n 40 --temp 0.9 --seed 8 --ids 2>/dev/null)
check "same seed, same ids" [ -n "$a" -a "$a" = "$b" ]
check "another seed, other ids" [ "$a" != "$c" ]
check "--ids prints one line of 40 ids" [ "$(printf '%s\n' "$a" | wc -l)" -eq 1 -a "$(echo $a | wc -w)" -eq 40 ]

# backends: cpu is silent about the choice; auto takes a hardware GPU where there is one and
# otherwise says why it uses the cpu (lavapipe, the CI's Vulkan driver, is software), so the
# check holds on either kind of machine; webgpu without its library is a clear error
# (tests/e2e/gpu_run_test.sh runs it for real)
"$POOLED" run -m "$SHARED/models/stories260K.gguf" -p "Once" -n 2 --temp 0 --backend cpu >/dev/null 2>"$TMP/err"
check "--backend cpu runs" [ $? -eq 0 ]
check "--backend cpu says nothing of the choice" bash -c "! grep -q 'backend auto' '$TMP/err'"
"$POOLED" run -m "$SHARED/models/stories260K.gguf" -p "Once" -n 2 --temp 0 --backend auto >/dev/null 2>"$TMP/err"
auto_rc=$?
if grep -q "^backend auto: .*; using cpu$" "$TMP/err"; then
    check "--backend auto fell back to cpu and ran" [ $auto_rc -eq 0 ]
    check "the fallback's load line names cpu" grep -q "| cpu, " "$TMP/err"
else
    # no note: a hardware GPU was taken; its load line names webgpu and no software adapter
    check "--backend auto on a hardware GPU runs" [ $auto_rc -eq 0 ]
    check "--backend auto took webgpu" grep -q "| webgpu, " "$TMP/err"
    check "--backend auto did not take a software adapter" bash -c "! grep -qi 'llvmpipe\|swiftshader' '$TMP/err'"
fi
POOLED_DAWN=/nonexistent check_err "--backend webgpu without Dawn is one clear line" "$POOLED" run -m "$SHARED/models/stories260K.gguf" -p "Once" --backend webgpu
check_err "unknown backend" "$POOLED" run -m "$SHARED/models/stories260K.gguf" -p "Once" --backend tpu
check_err "prompt longer than the context" "$POOLED" run -m "$SHARED/models/stories260K.gguf" -p "Once upon a time" --ctx 3
check_err "no prompt" "$POOLED" run -m "$SHARED/models/stories260K.gguf"
check_err "bad option value" "$POOLED" run -m "$SHARED/models/stories260K.gguf" -p "x" --temp hot

# generating past the context: output so far, then one error line, non-zero exit
"$POOLED" run -m "$SHARED/models/stories260K.gguf" -p "Once upon a time" -n 20 --temp 0 --ids --ctx 10 \
    >"$TMP/out" 2>"$TMP/err"
rc=$?
check "past the context: non-zero exit" [ $rc -ne 0 -a $rc -lt 128 ]
check "past the context: clear message" grep -q "^pooled: context full" "$TMP/err"
check "past the context: the ids that fit" [ "$(wc -w <"$TMP/out")" -eq 6 ]
finish
