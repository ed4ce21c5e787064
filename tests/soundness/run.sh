#!/usr/bin/env bash
# Runs one program of tests/soundness/ with --verify at each size of its `# SHAPES:` line ("-":
# the file's own sizes) on a target (default cpu), and fails unless every run verifies with no
# warning: these are programs users wrote that once miscompiled or failed to compile. A known
# gap that makes a slower path (a warning) at some size is written `# KNOWN-WARNING: SIZE TEXT`:
# that run may warn with TEXT, and must (the gap stays visible until it is closed).
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
  known=$(sed -n "s/^# KNOWN-WARNING: $s //p" "$file")
  if [ -n "$known" ] && [ "$target" = cpu ]; then
    if ! grep -qF "warning: $known" "$err"; then
      echo "FAIL: $file $s: the known warning '$known' is gone: remove its KNOWN-WARNING line"
      fail=1
    fi
    grep -vF "warning: $known" "$err" >"$err.rest"
    mv "$err.rest" "$err"
  fi
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
