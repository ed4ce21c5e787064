#!/usr/bin/env bash
# A small lit-style runner: executes every `# RUN:` line of a test file with bash (pipefail), after
# substituting %s (the test file), %examples (the examples folder), `kintsugi` (the built CLI) and
# `FileCheck` (LLVM's, from llvm-14-tools). The test passes when every RUN line exits 0.
set -u
kintsugi="$1"
filecheck="$2"
file="$3"
examples="$(cd "$(dirname "$0")/../../examples" && pwd)"
status=0
while IFS= read -r line; do
  cmd="${line#*RUN: }"
  cmd="${cmd//%examples/$examples}"
  cmd="${cmd//%s/$file}"
  cmd="${cmd//kintsugi /$kintsugi }"
  cmd="${cmd//FileCheck /$filecheck }"
  if ! bash -o pipefail -c "$cmd"; then
    echo "FAILED: $line"
    status=1
  fi
done < <(grep -E '^(#|//) RUN: ' "$file")
[ $status -eq 0 ] && echo "ok: $(basename "$file")"
exit $status
