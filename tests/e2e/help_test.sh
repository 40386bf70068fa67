#!/usr/bin/env bash
# help_test.sh - every subcommand's --help names every long option its parser takes: the
# options are read from the parser's source (the string literals compared with strcmp or
# taken by arg_take in cmd/pooled/cmd_NAME.c, plus the shared parsers of model_args.c the
# command calls), so an option added without help fails here. --split is a documented test
# switch (README) and is left out of --help on purpose.
. "$(dirname "$0")/lib.sh"
# long options in the lines of FILE between a line matching START and the next "^}"
opts_of() { # FILE [START]
    awk -v s="${2:-.}" '$0 ~ s {on = 1} on && /(strcmp|arg_take)\(/ {
        while (match($0, /"--[a-z][a-z0-9-]*"/)) { print substr($0, RSTART + 1, RLENGTH - 2)
            $0 = substr($0, RSTART + RLENGTH) } } on && s != "." && /^}/ {on = 0}' "$1" | sort -u
}
for name in run chat bench info quantize synth tokenize template room; do
    src=cmd/pooled/cmd_$name.c
    opts=$(opts_of "$src")
    grep -q 'model_args_take' "$src" && opts+=$'\n'$(opts_of cmd/pooled/model_args.c '^bool model_args_take')
    grep -q 'sampler_args_take' "$src" && opts+=$'\n'$(opts_of cmd/pooled/model_args.c '^bool sampler_args_take')
    grep -q 'stop_args_take' "$src" && opts+=$'\n'$(opts_of cmd/pooled/model_args.c '^bool stop_args_take')
    "$POOLED" $name --help >"$TMP/help" 2>&1
    check "$name --help exits 0" test $? -eq 0
    missing=""
    for o in $(sort -u <<<"$opts"); do
        case $o in --help | --split) continue ;; esac
        grep -q -- "$o\b" "$TMP/help" || missing+=" $o"
    done
    if [ -z "$missing" ]; then pass; else fail "$name --help does not name:$missing"; fi
done
finish
