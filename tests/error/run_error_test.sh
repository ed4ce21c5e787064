#!/usr/bin/env bash
# Runs one malformed program and checks that Kintsugi rejects it as a user error:
# exit code 1, the message fragment of its `# EXPECT:` line on stderr, and, for source errors, the
# `file:LINE:COL: error:` prefix of its `# LOCATION:` line. `# ARGS:` gives the subcommand and
# options (default: check); the file's path is appended unless ARGS names a file itself.
set -u
kintsugi="$1"
file="$2"
expect=$(sed -n 's/^# EXPECT: //p' "$file")
location=$(sed -n 's/^# LOCATION: //p' "$file")
args=$(sed -n 's/^# ARGS: //p' "$file")
[ -n "$args" ] || args="check"
if [[ "$args" == *".te"* ]]; then
  set -- $args
else
  set -- $args "$file"
fi
stderr=$(KINTSUGI_CACHE_DIR="${KINTSUGI_CACHE_DIR:-$(dirname "$0")/.cache}" "$kintsugi" "$@" 2>&1 >/dev/null)
code=$?
fail() {
  echo "FAIL: $file: $1"
  echo "--- command: kintsugi $*"
  echo "--- stderr:"
  echo "$stderr"
  exit 1
}
[ "$code" -eq 1 ] || fail "exit code $code, expected 1" "$@"
[[ "$stderr" == *"$expect"* ]] || fail "message does not contain: $expect" "$@"
if [ -n "$location" ]; then
  [[ "$stderr" == *"$file:$location: error:"* ]] || fail "no error at $location" "$@"
  [[ "$stderr" == *"^"* ]] || fail "no caret line" "$@"
fi
echo "ok: $(basename "$file")"
