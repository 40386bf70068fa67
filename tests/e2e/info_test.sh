#!/usr/bin/env bash
# info_test.sh - `pooled info` reports what the references say the shared GGUFs hold:
#   - fixtures/hf/*: every metadata key (type and value), every tensor (name, type, shape,
#     bytes), counts and architecture, against llama.cpp's own listing in llamacpp.json,
#     and the tensor counts the README states per architecture;
#   - models/: the facts in models/SOURCES.md, and for the quantized stories260K files the
#     per-tensor table llama-quantize printed (fixtures/llamacpp-b10573/*.tensors.txt);
#   - bad input and bad usage: one stderr line and a non-zero exit, never a crash.
. "$(dirname "$0")/lib.sh"

# ij FILE: path of `pooled info --json FILE`'s output, made once per file
mkdir -p "$TMP/j"
ij() {
    local k="$TMP/j/$(echo "$1" | tr '/' '_')"
    [ -f "$k" ] || "$POOLED" info --json "$1" >"$k" 2>"$TMP/err" || { rm -f "$k"; return 1; }
    echo "$k"
}

# jq program: compare `pooled info --json` (input) with one llamacpp.json "meta" entry
# ($ref); prints one line per difference.
read -r -d '' CMP <<'EOF'
def lt: {"STRING":"str","UINT32":"u32","INT32":"i32","FLOAT32":"f32","BOOL":"bool",
         "UINT64":"u64","INT64":"i64","FLOAT64":"f64","UINT8":"u8","INT8":"i8",
         "UINT16":"u16","INT16":"i16"};
def reftype: if startswith("ARRAY[") then "arr[" + lt[.[6:-1]] + "]" else lt[.] end;
def same(a; b): if (a|type) == "number" and (b|type) == "number"
                then ((a - b) | fabs) <= 1e-6 * ([(a|fabs), (b|fabs)] | max)
                else a == b end;
def mytype: if .type == "arr" then "arr[" + .elem_type + "]" else .type end;
$ref[0] as $r | . as $me |
( if $me.architecture != $r.architecture then "architecture \($me.architecture) != \($r.architecture)" else empty end ),
( if $me.file_size != $r.bytes then "file size \($me.file_size) != \($r.bytes)" else empty end ),
( if ($me.metadata|length) != $r.n_kv then "n_kv \($me.metadata|length) != \($r.n_kv)" else empty end ),
( if ($me.tensors|length) != $r.n_tensors then "n_tensors \($me.tensors|length) != \($r.n_tensors)" else empty end ),
( [$me.tensors[] | {name, type, ne: .shape, n_bytes: .bytes}] as $a
  | [$r.tensors[] | {name, type: (.type|ascii_downcase), ne, n_bytes}] as $b
  | if $a != $b then "tensor table differs: first \([$a, $b] | transpose | map(select(.[0] != .[1]))[0])" else empty end ),
( if $me.totals.types != ($r.tensor_type_counts | with_entries(.key |= ascii_downcase))
  then "type counts \($me.totals.types) != \($r.tensor_type_counts)" else empty end ),
( $r.kv | to_entries[] | .key as $k | .value as $rv | $me.metadata[$k] as $mv
  | if $mv == null then "missing key \($k)"
    elif ($mv|mytype) != ($rv.type|reftype) then "key \($k): type \($mv|mytype) != \($rv.type)"
    elif ($rv.value|type) == "object" then
      (if $mv.count != $rv.value.len then "key \($k): count \($mv.count) != \($rv.value.len)"
       elif $mv.value[0:($rv.value.head|length)] != $rv.value.head then "key \($k): head differs"
       else empty end)
    elif ($rv.value|type) == "array" then
      (if $mv.value != $rv.value then "key \($k): \($mv.value) != \($rv.value)" else empty end)
    elif $mv.truncated and $mv.type == "str" then
      (if ($rv.value | startswith($mv.value) | not) or $mv.len != ($rv.value | utf8bytelength)
       then "key \($k): shortened string is not a prefix of the reference" else empty end)
    elif same($mv.value; $rv.value) | not then "key \($k): \($mv.value) != \($rv.value)"
    else empty end )
EOF

HF=$SHARED/fixtures/hf
n_hf=0
for ref in "$HF"/*/llamacpp.json; do
    dir=$(dirname "$ref")
    for name in $(jq -r '.meta | keys[]' "$ref"); do
        gguf=$dir/$name
        [ -f "$gguf" ] || continue # the f32 files were trimmed from shared/ (README says so)
        n_hf=$((n_hf + 1))
        if ! j=$(ij "$gguf"); then fail "info --json $name: $(cat "$TMP/err")"; continue; fi
        diffs=$(jq -r --slurpfile ref <(jq ".meta[\"$name\"]" "$ref") "$CMP" "$j")
        if [ -z "$diffs" ]; then pass; else fail "$name vs llamacpp.json: $(echo "$diffs" | head -5)"; fi
    done
done
# 16 GGUFs are kept under fixtures/hf (README, "Trimmed"); all must have been compared.
check "all hf fixture GGUFs compared ($n_hf)" [ "$n_hf" -eq 16 ]

# The README's "-> `arch`, N tensors" line for each part-A architecture, on the q8_0 file.
while read -r folder arch count; do
    got=$(jq -r '"\(.architecture) \(.totals.tensors)"' "$(ij "$HF/$folder/$folder-q8_0.gguf")")
    check "$folder: README says $arch with $count tensors, got $got" [ "$got" = "$arch $count" ]
done < <(sed -n 's/^\* \*\*\([a-z0-9_]*\)\*\* -> `\([a-z0-9]*\)`, \([0-9]*\) tensors.*/\1 \2 \3/p' "$HF/README.md")
check "README lists six part-A architectures" \
    [ "$(grep -c '^\* \*\*[a-z0-9_]*\*\* -> `' "$HF/README.md")" -eq 6 ]

# models/SOURCES.md, "Model facts": stories260K.
M=$SHARED/models
J=$(ij "$M/stories260K.gguf")
q() { jq -r "$@" "$J"; }
check "stories260K: llama" [ "$(q .architecture)" = llama ]
check "stories260K: 48 tensors" [ "$(q .totals.tensors)" = 48 ]
check "stories260K: 292.8 K parameters" [ "$(q '.totals.parameters / 100 | round')" = 2928 ]
check "stories260K: all F32" [ "$(q -c .totals.types)" = '{"f32":48}' ]
check "stories260K: n_embd 64" [ "$(q '.metadata["llama.embedding_length"].value')" = 64 ]
check "stories260K: n_layer 5" [ "$(q '.metadata["llama.block_count"].value')" = 5 ]
check "stories260K: n_head 8" [ "$(q '.metadata["llama.attention.head_count"].value')" = 8 ]
check "stories260K: n_head_kv 4" [ "$(q '.metadata["llama.attention.head_count_kv"].value')" = 4 ]
check "stories260K: n_ff 172" [ "$(q '.metadata["llama.feed_forward_length"].value')" = 172 ]
check "stories260K: n_ctx_train 2048" [ "$(q '.metadata["llama.context_length"].value')" = 2048 ]
check "stories260K: rms eps 1e-5" [ "$(q '.metadata["llama.attention.layer_norm_rms_epsilon"].value * 1e5 | round')" = 1 ]
check "stories260K: 512 tokens" [ "$(q '.metadata["tokenizer.ggml.tokens"].count')" = 512 ]
check "stories260K: SPM" [ "$(q '.metadata["tokenizer.ggml.model"].value')" = llama ]
check "stories260K: BOS 1 EOS 2 UNK 0" [ "$(q '[.metadata["tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"].value] | join(",")')" = 1,2,0 ]
check "stories260K: token_embd [64,512]" [ "$(q -c '.tensors[] | select(.name == "token_embd.weight") | .shape')" = "[64,512]" ]
check "stories260K: separate output [64,512]" [ "$(q -c '.tensors[] | select(.name == "output.weight") | .shape')" = "[64,512]" ]
# head_dim 8 = n_embd / n_head, GQA 2: attn_q is [64, 8*8], attn_k [64, 4*8]
check "stories260K: attn_q [64,64], attn_k [64,32]" \
    [ "$(q -c '[.tensors[] | select(.name == "blk.4.attn_q.weight" or .name == "blk.4.attn_k.weight") | .shape]')" = "[[64,64],[64,32]]" ]
check "stories260K: ffn_down [172,64]" [ "$(q -c '.tensors[] | select(.name == "blk.0.ffn_down.weight") | .shape')" = "[172,64]" ]
out=$("$POOLED" info "$M/stories260K.gguf")
check "stories260K text: architecture line" grep -q '^architecture: *llama$' <<<"$out"
check "stories260K text: token_embd row" grep -Eq '^ +0 token_embd\.weight +f32 +\[64, 512\] ' <<<"$out"
check "stories260K text: totals" grep -q '^totals: 48 tensors, 292800 parameters' <<<"$out"
check "stories260K text: vocabulary shortened" grep -q 'arr\[str,512\] .*\.\.\. 504 more\]' <<<"$out"

# llama-2-tiny-random: F16 with F32 norms, n_embd 8, 1 layer, 2/2 heads, n_ff 32, rope dim 4.
J=$(ij "$M/llama-2-tiny-random.gguf")
check "tiny-random: llama" [ "$(q .architecture)" = llama ]
check "tiny-random: n_embd 8" [ "$(q '.metadata["llama.embedding_length"].value')" = 8 ]
check "tiny-random: 1 layer" [ "$(q '.metadata["llama.block_count"].value')" = 1 ]
check "tiny-random: 2 heads, 2 kv heads" [ "$(q '[.metadata["llama.attention.head_count", "llama.attention.head_count_kv"].value] | join(",")')" = 2,2 ]
check "tiny-random: n_ff 32" [ "$(q '.metadata["llama.feed_forward_length"].value')" = 32 ]
check "tiny-random: rope dim 4" [ "$(q '.metadata["llama.rope.dimension_count"].value')" = 4 ]
check "tiny-random: n_ctx_train 4096" [ "$(q '.metadata["llama.context_length"].value')" = 4096 ]
check "tiny-random: 32000 tokens" [ "$(q '.metadata["tokenizer.ggml.tokens"].count')" = 32000 ]
check "tiny-random: 513.05 K parameters" [ "$(q '.totals.parameters / 10 | round')" = 51305 ]
check "tiny-random: token_embd [8,32000]" [ "$(q -c '.tensors[] | select(.name == "token_embd.weight") | .shape')" = "[8,32000]" ]
check "tiny-random: 2-D tensors F16, 1-D F32" [ "$(q '[.tensors[] | select((.shape|length == 1) != (.type == "f32"))] | length')" = 0 ]

# Quantized stories260K: every tensor's shape and type as llama-quantize printed them.
for t in Q4_0 Q8_0; do
    exp=$(sed -E 's/^([^ ]+) +- \[ *([0-9]+), *([0-9]+), *([0-9]+), *([0-9]+)\], type = +([a-z0-9_]+),( converting to ([a-z0-9_]+))?.*/\1 \2,\3,\4,\5 \6 \8/' \
        "$SHARED/fixtures/llamacpp-b10573/quantize_stories260K_$t.tensors.txt" |
        awk '{print $1, $2, ($4 != "" ? $4 : $3)}' | sort)
    got=$(jq -r '.tensors[] | "\(.name) \((.shape + [1,1,1,1])[0:4] | join(",")) \(.type)"' \
        "$(ij "$M/stories260K-$t.gguf")" | sort)
    check "stories260K-$t: 48 tensors listed by llama-quantize" [ "$(wc -l <<<"$exp")" -eq 48 ]
    if [ "$exp" = "$got" ]; then pass; else fail "stories260K-$t tensors: $(diff <(echo "$exp") <(echo "$got") | head -5)"; fi
done

# fixtures/quant: every tensor's type and shape as expected.json lists them (rows, cols).
Q=$SHARED/fixtures/quant
for f in $(jq -r '.files | keys[]' "$Q/expected.json"); do
    exp=$(jq -r --arg f "$f" '.files[$f] | to_entries[] | "\(.key) \(.value.type | ascii_downcase) \(.value.shape_rows_cols | reverse | join(","))"' "$Q/expected.json" | sort)
    got=$(jq -r '.tensors[] | "\(.name) \(.type) \(.shape | join(","))"' "$(ij "$Q/$f")" | sort)
    if [ -n "$exp" ] && [ "$exp" = "$got" ]; then pass; else fail "$f tensors: $(diff <(echo "$exp") <(echo "$got") | head -4)"; fi
done

# Every GGUF under models/ and fixtures/ reads, and --json is valid JSON with as many
# tensors as the table says.
n=0
while IFS= read -r f; do
    n=$((n + 1))
    if j=$(ij "$f") && jq -e '(.tensors | length) == .totals.tensors' "$j" >/dev/null; then pass
    else fail "$f: $(head -c 200 "$TMP/err")"; fi
done < <(find "$SHARED/models" "$SHARED/fixtures" -name '*.gguf' | sort)
check "found the 41 shared GGUFs ($n)" [ "$n" -ge 41 ]

# Strings that are not plain text (a newline, quotes, invalid UTF-8, nested arrays): the
# fuzz seed made by tests/format/gguf_samples.h. --json stays valid, text keeps one line a key.
R=tests/fuzz/corpus/gguf_fuzz/rich.gguf
check "odd strings: valid JSON, bad byte as U+FFFD" \
    jq -e '.metadata["tokenizer.ggml.tokens"].value[4] == "bad \ufffd utf8" and .metadata["general.name"].value == "sample \u2713 \"quoted\"\n"' \
    <("$POOLED" info --json "$R") >/dev/null
check "odd strings: one text line per key" \
    [ "$("$POOLED" info "$R" | awk '/^metadata \(/{on=1; next} /^$/{on=0} on' | wc -l)" -eq 29 ]

# Bad input and bad usage.
printf 'GGUF' >"$TMP/magic-only.gguf"
head -c 1000 "$M/stories260K.gguf" >"$TMP/cut-meta.gguf"
head -c 100000 "$M/stories260K.gguf" >"$TMP/cut-data.gguf"
: >"$TMP/empty.gguf"
check_err "missing file" "$POOLED" info "$TMP/nope.gguf"
check_err "directory" "$POOLED" info "$TMP"
check_err "empty file" "$POOLED" info "$TMP/empty.gguf"
check_err "not a GGUF" "$POOLED" info "$SHARED/models/SOURCES.md"
check_err "magic only" "$POOLED" info "$TMP/magic-only.gguf"
check_err "cut in the metadata" "$POOLED" info "$TMP/cut-meta.gguf"
check_err "cut in the tensor data" "$POOLED" info --json "$TMP/cut-data.gguf"
check_err "no file" "$POOLED" info
check_err "two files" "$POOLED" info "$M/stories260K.gguf" "$M/stories260K.gguf"
check_err "unknown option" "$POOLED" info --bogus "$M/stories260K.gguf"
# hand-made hostile files: absurd count, a key holding a newline (the message must stay one
# line), a tensor whose byte size overflows 64 bits (2^61 f64 values), nesting 10000 deep
hdr() { printf 'GGUF\x03\x00\x00\x00'; printf "$1"; printf "$2"; }
u64_0='\x00\x00\x00\x00\x00\x00\x00\x00'; u64_1='\x01\x00\x00\x00\x00\x00\x00\x00'
hdr '\xff\xff\xff\xff\xff\xff\xff\xff' "$u64_0" >"$TMP/count.gguf"
{ hdr "$u64_0" "$u64_1"; printf '\x03\x00\x00\x00\x00\x00\x00\x00a\nb\x0d\x00\x00\x00'; } >"$TMP/newline.gguf"
{ hdr "$u64_1" "$u64_0"; printf '\x01\x00\x00\x00\x00\x00\x00\x00t\x01\x00\x00\x00'
  printf '\x00\x00\x00\x00\x00\x00\x00\x20\x1c\x00\x00\x00'; printf "$u64_0"; head -c 64 /dev/zero; } >"$TMP/wrap.gguf"
{ hdr "$u64_0" "$u64_1"; printf '\x01\x00\x00\x00\x00\x00\x00\x00k\x09\x00\x00\x00'
  for _ in $(seq 10000); do printf '\x09\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00'; done; } >"$TMP/deep.gguf"
check_err "absurd tensor count" "$POOLED" info "$TMP/count.gguf"
check_err "key with a newline" "$POOLED" info "$TMP/newline.gguf"
check "  ... named on one line" grep -q "key 'a?b' has bad type 13" "$TMP/err"
check_err "byte size overflows 64 bits" "$POOLED" info --json "$TMP/wrap.gguf"
check "  ... said so" grep -q "too large" "$TMP/err"
check_err "arrays nested 10000 deep" "$POOLED" info "$TMP/deep.gguf"
check "--help" "$POOLED" info --help >/dev/null
check "--full prints every token" [ "$("$POOLED" info --full --json "$M/stories260K.gguf" | jq '.metadata["tokenizer.ggml.tokens"].value | length')" -eq 512 ]

finish
