#!/usr/bin/env bash
# Runs one program of tests/soundness/ with --verify at each size of its `# SHAPES:` line ("-":
# the file's own sizes) on a target (default cpu), and fails unless every run verifies with no
# warning: these are programs users wrote that once miscompiled or failed to compile.
#   tests/soundness/run.sh KINTSUGI_BINARY FILE.te [cpu|cuda]
set -u
bin="$1" file="$2" target="${3:-cpu}"
shapes=$(sed -n 's/^# SHAPES: //p' "$file")
fail=0
for s in $shapes; do
  args=()
  [ "$s" = - ] || args=(--shape "$s")
  err=$(mktemp)
  out=$("$bin" run "$file" --target "$target" --verify "${args[@]}" 2>"$err")
  code=$?
  if [ $code -ne 0 ] || [ -s "$err" ] || ! grep -q "verified against" <<<"$out"; then
    echo "FAIL: $file $s (exit $code)"
    cat "$err"
    echo "$out"
    fail=1
  else
    echo "ok: $(basename "$file") $s $(grep -o 'max rel err [^ ]*' <<<"$out" | head -1)"
  fi
  rm -f "$err"
done
exit $fail
