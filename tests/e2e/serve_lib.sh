# serve_lib.sh - helpers of the serve tests (sourced after lib.sh, not run).

# start NAME ARGS...: a server on a free port; its URL in $URL, its pid in $PID
start() {
    local name=$1; shift
    "$POOLED" serve "$@" --host 127.0.0.1 --port 0 >"$TMP/$name.out" 2>"$TMP/$name.err" &
    PID=$!
    URL=
    for _ in $(seq 200); do
        URL=$(sed -n 's/^pooled serve: listening on //p' "$TMP/$name.out")
        [ -n "$URL" ] && curl -sf "$URL/health" >/dev/null && return 0
        kill -0 $PID 2>/dev/null || break
        sleep 0.1
    done
    fail "$name: the server did not come up: $(tail -n 3 "$TMP/$name.err")"
    return 1
}

# node_checks SCRIPT [VAR=VALUE...]: a node script's checks ("FAIL: ..." lines, then
# "RESULT passed failed") added to this test's counts
node_checks() {
    local script=$1 out res
    shift
    out=$(env "$@" node "$script" 2>&1)
    echo "$out" | grep -v '^RESULT'
    res=$(echo "$out" | sed -n 's/^RESULT //p')
    if [ -n "$res" ]; then
        _pass=$((_pass + ${res% *})); _fail=$((_fail + ${res#* }))
    else
        fail "$script ended without a RESULT line: $(echo "$out" | tail -n 2)"
    fi
}

