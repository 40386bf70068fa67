#!/usr/bin/env bash
# quantize_test.sh - `pooled quantize` makes llama-quantize's files: stories260K.gguf to
# Q8_0 and Q4_0 with `--pure --tensor-type ffn_down=f32` (how shared/models/SOURCES.md says
# the shared files were made) gives files byte-identical to stories260K-Q8_0/-Q4_0.gguf.
# Also: the fallback note for rows a type cannot hold, --help, and bad usage (one stderr
# line, non-zero exit, no output file left behind).
. "$(dirname "$0")/lib.sh"
M=$SHARED/models

for t in Q8_0 Q4_0; do
    check "quantize to $t runs" "$POOLED" quantize "$M/stories260K.gguf" "$TMP/s-$t.gguf" "$t" \
        --pure --tensor-type ffn_down=f32
    check "$t file is byte-identical to llama-quantize's" cmp -s "$TMP/s-$t.gguf" "$M/stories260K-$t.gguf"
done

# ffn_down has 172 columns: without the override each gets a one-line note and is stored as f16
"$POOLED" quantize "$M/stories260K.gguf" "$TMP/fb.gguf" q8_0 --pure 2>"$TMP/notes"
check "fallback run succeeds" test -s "$TMP/fb.gguf"
check "one note per ffn_down" test "$(grep -c 'ffn_down.weight: rows of 172 values .* stored as f16' "$TMP/notes")" = 5

check "--help" "$POOLED" quantize --help >/dev/null
check_err "missing arguments" "$POOLED" quantize "$M/stories260K.gguf"
check_err "unknown type" "$POOLED" quantize "$M/stories260K.gguf" "$TMP/x.gguf" q9_9
check_err "type we cannot write" "$POOLED" quantize "$M/stories260K.gguf" "$TMP/x.gguf" iq2_xxs
check_err "bad override" "$POOLED" quantize "$M/stories260K.gguf" "$TMP/x.gguf" q8_0 --tensor-type ffn_down
check_err "bad pattern" "$POOLED" quantize "$M/stories260K.gguf" "$TMP/x.gguf" q8_0 --tensor-type 'a(b=f32'
check_err "unknown option" "$POOLED" quantize "$M/stories260K.gguf" "$TMP/x.gguf" q8_0 --fast
check_err "missing input" "$POOLED" quantize "$TMP/none.gguf" "$TMP/x.gguf" q8_0
printf 'GGUF\3\0\0\0garbage' >"$TMP/bad.gguf"
check_err "corrupt input" "$POOLED" quantize "$TMP/bad.gguf" "$TMP/x.gguf" q8_0
check "no output left by failed runs" test ! -e "$TMP/x.gguf"
finish
