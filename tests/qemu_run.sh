#!/usr/bin/env bash
# qemu_run.sh "QEMU" BUILD CPU:LEVEL... - run every test program in BUILD/tests (a cross
# build: `make cross-arm64`) under the emulator command QEMU once per CPU model, the models
# side by side. POOLED_EXPECT_NEON=LEVEL tells cpu_qdot_test which kernels that model must
# select (2: SDOT, 1: plain NEON), so a run cannot pass on the wrong path. Adds up the
# RESULT lines as tests/run.sh does and ends with "N passed, N failed"; non-zero exit if
# anything failed, crashed or printed no RESULT line.
set -u
qemu=$1 build=$2
shift 2
tmp=$(mktemp -d /tmp/pooled-qemu.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# one_cpu CPU LEVEL: each test in turn; "passed failed" lines into $tmp/CPU.count
one_cpu() {
    local cpu=$1 level=$2 t name out rc line p f start end
    for t in "$build"/tests/*; do
        name=$(basename "$t")
        start=$(date +%s.%N)
        out=$(POOLED_EXPECT_NEON=$level $qemu -cpu "$cpu" "$t" 2>&1); rc=$?
        end=$(date +%s.%N)
        line=$(printf '%s\n' "$out" | grep '^RESULT ' | tail -n 1)
        p=$(echo "$line" | awk '{print $2}') f=$(echo "$line" | awk '{print $3}')
        if [ -z "$line" ] || [ "$f" != 0 ] || [ "$rc" != 0 ]; then
            printf '%s\n' "$out" | grep -v '^RESULT ' | tail -n 30
            [ -z "$line" ] && echo "CRASH $name on $cpu (exit $rc, no RESULT line)" && p=0
            [ "${f:-0}" = 0 ] && f=1
        fi
        printf '%-20s %-12s %5d passed %3d failed  %6.2fs\n' "$name" "$cpu" "$p" "$f" \
            "$(awk -v a="$start" -v b="$end" 'BEGIN{print b-a}')"
        echo "$p $f" >>"$tmp/$cpu.count"
    done >"$tmp/$cpu.out"
}

cpus=()
for spec in "$@"; do
    cpus+=("${spec%%:*}")
    one_cpu "${spec%%:*}" "${spec##*:}" &
done
wait
passed=0 failed=0
for cpu in "${cpus[@]}"; do
    cat "$tmp/$cpu.out"
    while read -r p f; do passed=$((passed + p)) failed=$((failed + f)); done <"$tmp/$cpu.count"
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
