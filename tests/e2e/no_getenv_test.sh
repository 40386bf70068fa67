#!/usr/bin/env bash
# no_getenv_test.sh - libpooled reads no environment variable: its settings come in option
# structs (issue 14; the pooled command reads POOLED_* and passes them in). Fails when any
# object of build/libpooled.a references getenv, secure_getenv or environ.
. "$(dirname "$0")/lib.sh"
LIB=$(dirname "$POOLED")/libpooled.a
check "libpooled.a exists" test -f "$LIB"
refs=$(nm -A "$LIB" 2>/dev/null | grep -E ' U (secure_getenv|getenv|__environ|environ)$')
if [ -z "$refs" ]; then pass; else fail "libpooled.a reads the environment: $refs"; fi
finish
