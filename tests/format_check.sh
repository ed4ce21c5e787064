#!/usr/bin/env bash
# Checks that every tracked C++ file is formatted with the pinned formatter (clang-format-19).
set -u
cd "$(dirname "$0")/.."
cf=$(command -v clang-format-19) || { echo "clang-format-19 is not installed"; exit 1; }
bad=0
while IFS= read -r f; do
  "$cf" --dry-run -Werror "$f" >/dev/null 2>&1 || { echo "not formatted: $f (run: clang-format-19 -i $f)"; bad=1; }
done < <(git ls-files '*.cpp' '*.h' '*.cuh' 2>/dev/null || find src include tools tests -name '*.cpp' -o -name '*.h')
[ $bad -eq 0 ] && echo "all C++ files formatted"
exit $bad
