# room_device_bench_test.sh - tools/room_device_bench.sh (the H200's room recipe) on
# stories260K with the cpu backend: one process, a room of host + 2 workers and one process
# over 3 stages (--split) measured, a line per quantity with the numbers and positive
# ratios, its temporary folder
# removed; a model it cannot split is one line and exit 1.
. tests/e2e/lib.sh
S=$SHARED/models/stories260K.gguf
BIN=$POOLED MODEL=$S BACKEND=cpu THREADS=1 WORKERS=2 ARGS="-p 16 -n 8 -r 1" TMPDIR=$TMP \
    timeout 120 bash tools/room_device_bench.sh >"$TMP/out" 2>"$TMP/err"
rc=$?
check "the script exits 0 ($(tail -n 1 "$TMP/err"))" [ $rc -eq 0 ]
check "it names the split: host + 2 workers, layers 0,1,3,5" grep -q "host + 2 worker(s), layers 0,1,3,5" "$TMP/out"
for f in prefill_tok_s decode_tok_s ttft_ms; do
    check "$f: one process, room and a positive ratio" awk -v f=$f \
        '$1 == f && $2 == "one" && $4 > 0 && $5 == "room" && $6 > 0 && $8 > 0 &&
         $9 == "split" && $10 > 0 && $12 > 0 { ok = 1 }
         END { exit !ok }' "$TMP/out"
done
check "nothing left in its temporary folder" [ -z "$(ls "$TMP" | grep room-bench)" ]
BIN=$POOLED MODEL=$S BACKEND=cpu WORKERS=9 TMPDIR=$TMP bash tools/room_device_bench.sh \
    >"$TMP/out2" 2>"$TMP/err2"
rc=$?
check "5 layers cannot go to 10 members: exit 1" [ $rc -eq 1 ]
check "... with one line saying so" grep -q "cannot split" "$TMP/err2"
check "... only that line" [ "$(wc -l <"$TMP/err2")" -eq 1 ]
finish
