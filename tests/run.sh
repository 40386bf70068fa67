#!/usr/bin/env bash
# run.sh [FILTER] - run every test program (and tests/e2e/*.sh script) whose name FILTER (an
# extended regular expression: a plain name matches the names that contain it, and
# "gpu_|spec_test" either) matches, add up their RESULT
# lines, and end with "N passed, N failed". Exit status is non-zero if anything failed or
# crashed. Tests run POOLED_TEST_JOBS at a time (default: the number of cores), the slowest
# first so that CI's two cores finish together; each test's report is printed whole, in the
# order the tests finish. Every test has its own temporary folders, so none shares a file.
set -u
BUILD=${POOLED_BUILD:-build}
export POOLED_BIN=${POOLED_BIN:-$BUILD/pooled}
export POOLED_SHARED=${POOLED_SHARED:-../shared}
export POOLED_TEST_TMP=$(mktemp -d /tmp/pooled-tests.XXXXXX)
trap 'rm -rf "$POOLED_TEST_TMP"' EXIT
# Under ASan (make check), freed memory is never handed back to the OS: lavapipe's LLVM,
# which compiles every GPU kernel inside the test's process and so through ASan's allocator,
# otherwise spends much of its time in madvise, TLB flushes and fresh page faults
# (backend_ops_test alone on 2 shared cores, cold shader cache: 257 s -> 200 s, of which
# system time 67 s -> 38 s). Only speed changes: the
# quarantine, redzones and leak check are as before. A caller's ASAN_OPTIONS come after, so
# they win.
export ASAN_OPTIONS="allocator_release_to_os_interval_ms=-1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
filter=${1:-}
jobs=${POOLED_TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
reports=$POOLED_TEST_TMP/.reports
mkdir -p "$reports"

# The tests that take longest (CI's timings: under the sanitizers after `make gpu-test` has
# filled the shader cache, and in that plain run of the GPU tests), started first.
slow="gpu_model_test backend_ops_test gpu_kernels_test gpu_run_test gpu_gemm_test room_cmd_test
nonfinite_test option_errors_test gpu_gemv_cols_test io_test gpu_dispatch_test spec_test
room_test bench_streams_test gpu_ops_test jinja_hostile_test cli_test serve_load_test"

# run_one NAME CMD...: runs the test, writes "passed failed" to $reports/NAME.count and its
# printable report to $reports/NAME.out
run_one() {
    local name=$1; shift
    local out rc start end line p f
    start=$(date +%s.%N)
    out=$("$@" 2>&1); rc=$?
    end=$(date +%s.%N)
    line=$(printf '%s\n' "$out" | grep '^RESULT ' | tail -n 1)
    {
        if [ -z "$line" ]; then
            printf '%s\n' "$out" | tail -n 30
            echo "CRASH $name (exit $rc, no RESULT line)"
            p=0; f=1
        else
            p=$(echo "$line" | awk '{print $2}'); f=$(echo "$line" | awk '{print $3}')
            if [ "$f" != 0 ] || [ "$rc" != 0 ]; then
                printf '%s\n' "$out" | grep -v '^RESULT ' | tail -n 40
                [ "$f" = 0 ] && f=1
            fi
            printf '%-32s %5d passed %3d failed  %6.2fs\n' "$name" "$p" "$f" \
                "$(awk -v a="$start" -v b="$end" 'BEGIN{print b-a}')"
        fi
    } >"$reports/$name.out"
    echo "$p $f" >"$reports/$name.count"
    cat "$reports/$name.out"
}

# the list: NAME<TAB>kind, slow ones first
list=()
for t in $(ls "$BUILD"/tests/ 2>/dev/null | sort); do list+=("$t"$'\t'bin); done
for s in $(ls tests/e2e/*_test.sh 2>/dev/null | sort); do list+=("$(basename "$s" .sh)"$'\t'sh); done
ordered=()
for n in $slow; do
    for e in "${list[@]}"; do [ "${e%%$'\t'*}" = "$n" ] && ordered+=("$e"); done
done
for e in "${list[@]}"; do
    case " $(echo $slow) " in *" ${e%%$'\t'*} "*) ;; *) ordered+=("$e") ;; esac
done

names=()
for e in "${ordered[@]}"; do
    name=${e%%$'\t'*}; kind=${e##*$'\t'}
    [ -n "$filter" ] && ! [[ "$name" =~ $filter ]] && continue
    names+=("$name")
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    if [ "$kind" = bin ]; then
        run_one "$name" "$BUILD/tests/$name" &
    else
        run_one "$name" bash "tests/e2e/$name.sh" &
    fi
done
wait

passed=0; failed=0
for name in "${names[@]}"; do
    if [ -f "$reports/$name.count" ]; then
        read -r p f <"$reports/$name.count"
    else
        echo "CRASH $name (the runner lost its report)"; p=0; f=1
    fi
    passed=$((passed + p)); failed=$((failed + f))
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
