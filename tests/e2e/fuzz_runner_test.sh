# fuzz_runner_test.sh - tests/fuzz/run.sh, with two stand-in fuzzers in a scratch tree: one
# that passes and one that "crashes" (writes an input where -artifact_prefix says and fails).
# The failing one must fail the run and leave its crash input where the printed path says.
. tests/e2e/lib.sh
runner=$PWD/tests/fuzz/run.sh
mkdir -p "$TMP/t/build/fuzz" "$TMP/t/tests/fuzz/corpus/bad_fuzz"
echo seed >"$TMP/t/tests/fuzz/corpus/bad_fuzz/s1"
cat >"$TMP/t/build/fuzz/bad_fuzz" <<'X'
#!/bin/bash
for a; do case $a in -artifact_prefix=*) p=${a#-artifact_prefix=} ;; esac; done
[ -f "${@: -1}/s1" ] || exit 3  # the seed corpus was handed over
echo boom >"${p}crash-0001"; echo "==1==ERROR: deliberate"; exit 1
X
cat >"$TMP/t/build/fuzz/good_fuzz" <<'X'
#!/bin/bash
echo "stat::number_of_executed_units: 7"; exit 0
X
chmod +x "$TMP/t/build/fuzz/"*
(cd "$TMP/t" && FUZZ_JOBS=2 bash "$runner" 1) >"$TMP/out" 2>&1
check "a failing fuzzer fails the run" [ $? -ne 0 ]
check "the passing fuzzer's count is printed" grep -q "good_fuzz: stat::number_of_executed_units: 7" "$TMP/out"
path=$(grep -o "build/fuzz-artifacts/bad_fuzz[^ ]*/found/crash-0001" "$TMP/out" | head -n 1)
check "the crash input's path is printed" [ -n "$path" ]
check "the crash input is kept there" grep -q boom "$TMP/t/$path"
check "its log is kept" grep -q deliberate "$TMP/t/${path%/found/*}/log"
rm -f "$TMP/t/build/fuzz/bad_fuzz"
(cd "$TMP/t" && bash "$runner" 1) >"$TMP/out" 2>&1
check "all passing: status 0" [ $? -eq 0 ]
finish
