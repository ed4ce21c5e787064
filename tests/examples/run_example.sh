#!/usr/bin/env bash
# Runs one example on the CPU with --verify --json (extra options after the file) and checks that
# it exits 0 and reports "verified": true.
set -u
kintsugi="$1"
shift
out=$("$kintsugi" run "$@" --target cpu --verify --json)
code=$?
echo "$out"
[ $code -eq 0 ] || { echo "FAIL: exit code $code"; exit 1; }
[[ "$out" == *'"verified":true'* ]] || { echo "FAIL: not verified"; exit 1; }
