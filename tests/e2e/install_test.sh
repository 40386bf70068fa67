#!/usr/bin/env bash
# install_test.sh - `make install` into a temporary DESTDIR: the static and shared
# libraries (soname links), include/pooled.h and pooled.pc; the shared library exports only
# pooled_* symbols; examples/simple_generate.c, built against the installed tree through
# pkg-config, prints exactly what `pooled run --temp 0` prints for the same prompt;
# examples/parallel_json.c answers several questions at once, each as schema-valid JSON.
. "$(dirname "$0")/lib.sh"
B=$(dirname "$POOLED")
M=$SHARED/models/stories260K.gguf
R=$TMP/root
# the build's own flags (a sanitizer build stays one: nothing is rebuilt)
san=0; grep -q fsanitize "$B/obj/lib-flags" 2>/dev/null && san=1
before=$(stat -c %Y "$B/libpooled.a")
check "make install" make -s install BUILD="$B" SAN=$san PREFIX=/usr DESTDIR="$R" >/dev/null
check "install rebuilt nothing" test "$(stat -c %Y "$B/libpooled.a")" = "$before"
for f in lib/libpooled.a lib/libpooled.so lib/libpooled.so.0 include/pooled.h lib/pkgconfig/pooled.pc; do
    check "installed $f" test -e "$R/usr/$f"
done
check "soname" bash -c "objdump -p '$R/usr/lib/libpooled.so' | grep -q 'SONAME *libpooled.so.0$'"
others=$(nm -D --defined-only "$R/usr/lib/libpooled.so" | awk '$2 ~ /[TDBRW]/ && $3 !~ /^pooled_/ {print $3}' | grep -v '^_' | head -5)
if [ -z "$others" ]; then pass; else fail "libpooled.so exports more than pooled_*: $others"; fi
check "pooled_generate exported" bash -c "nm -D --defined-only '$R/usr/lib/libpooled.so' | grep -q ' T pooled_generate$'"
export PKG_CONFIG_PATH=$R/usr/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$R
flags=$(pkg-config --cflags --libs pooled)
# a sanitizer build's library needs the sanitizer runtime in the program too
san=""; nm -D "$R/usr/lib/libpooled.so" | grep -q __asan_init && san="-fsanitize=address,undefined"
check "example builds against the installed tree" \
    cc -std=c11 -Wall -Wextra -Werror $san examples/simple_generate.c $flags -o "$TMP/simple"
P="Once upon a time"
LD_LIBRARY_PATH=$R/usr/lib "$TMP/simple" "$M" "$P" 40 cpu >"$TMP/api.txt" 2>"$TMP/api.err"
check "example runs" test $? -eq 0
"$POOLED" run -m "$M" -p "$P" -n 40 --temp 0 --backend cpu >"$TMP/cli.txt" 2>/dev/null
check "the API's text is pooled run's" cmp "$TMP/api.txt" "$TMP/cli.txt"
check "some text came" test -s "$TMP/api.txt"
# examples/lookup_decode.c: prompt-lookup drafts checked by pooled_session_verify, rejected
# ones dropped by pooled_session_truncate: pooled run's greedy ids, in fewer passes when the
# text repeats (stories260K), and over a recurrent state that re-runs on truncate (qwen3_5)
check "lookup_decode builds against the installed tree" \
    cc -std=c11 -Wall -Wextra -Werror $san examples/lookup_decode.c $flags -o "$TMP/ld"
RP="Tom and his dog. Tom and his dog. Tom and his dog."
for mp in "$M|$RP" "$SHARED/fixtures/hf/qwen3_5/qwen3_5-q8_0.gguf|$RP"; do
    mf=${mp%%|*} pr=${mp#*|}
    LD_LIBRARY_PATH=$R/usr/lib "$TMP/ld" "$mf" "$pr" 48 cpu --ids >"$TMP/ld.ids" 2>"$TMP/ld.err"
    check "lookup_decode runs on $(basename "$mf") ($(head -c 200 "$TMP/ld.err"))" test $? -eq 0
    "$POOLED" run -m "$mf" -p "$pr" -n 48 --temp 0 --ids --backend cpu >"$TMP/run.ids" 2>/dev/null
    check "lookup_decode's ids are pooled run's on $(basename "$mf")" cmp "$TMP/ld.ids" "$TMP/run.ids"
done
LD_LIBRARY_PATH=$R/usr/lib "$TMP/ld" "$M" "$RP" 48 cpu --ids >/dev/null 2>"$TMP/ld.err"
acc=$(sed -n 's/.* \([0-9]*\) of \([0-9]*\) guesses accepted/\1 \2/p' "$TMP/ld.err")
check "stories260K, a repeating prompt: some guesses accepted, some not ($acc)" \
    awk -v a="${acc% *}" -v g="${acc#* }" 'BEGIN { exit !(a > 0 && g > a) }'
# examples/parallel_json.c: three questions at once (n_parallel 3, one thread each), every
# whole answer a JSON object of the schema's fields and types (random weights: any values)
check "parallel_json builds against the installed tree" \
    cc -std=c11 -Wall -Wextra -Werror $san examples/parallel_json.c $flags -pthread -o "$TMP/pj"
Q=$SHARED/fixtures/hf/qwen3/qwen3-q8_0.gguf
LD_LIBRARY_PATH=$R/usr/lib "$TMP/pj" "$Q" "Describe a cat." "Describe a dog." "Describe a bird." \
    >"$TMP/pj.json" 2>"$TMP/pj.err"
check "parallel_json runs" test $? -eq 0
check "parallel_json: each whole answer holds the schema" jq -e -s >/dev/null \
    'length >= 1 and all(.[]; (keys == ["legs", "name", "pet"]) and (.name | type) == "string"
     and (.legs | type) == "number" and (.legs | floor) == .legs and (.pet | type) == "boolean")' \
    "$TMP/pj.json"
finish
