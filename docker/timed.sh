#!/usr/bin/env bash
# Runs a command and prints "<label>: <seconds> s" when it succeeds; keeps its exit status.
# Usage: docker/timed.sh LABEL COMMAND [ARGS...]
label=$1; shift
start=$(date +%s%N)
"$@"; rc=$?
[ $rc -eq 0 ] && awk -v ns=$(( $(date +%s%N) - start )) -v l="$label" 'BEGIN { printf "%s: %.1f s\n", l, ns / 1e9 }'
exit $rc
