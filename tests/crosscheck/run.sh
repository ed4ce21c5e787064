#!/usr/bin/env bash
# Runs the NumPy cross-check suite (for ctest, label crosscheck).
#   tests/crosscheck/run.sh [KINTSUGI_BINARY] [extra pytest arguments...]
# The binary defaults to $KINTSUGI, then build/bin/kintsugi. KINTSUGI_TARGET (default cpu) and
# KINTSUGI_CACHE_DIR pass through; KINTSUGI_PYTHON picks the interpreter. Exit status: pytest's (0 = all passed); 77 when Debian's
# python3 lacks numpy or pytest (ctest reports the test as skipped).
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [ $# -ge 1 ]; then
  KINTSUGI="$(realpath -m -- "$1")"
  shift
fi
export KINTSUGI="${KINTSUGI:-$root/build/bin/kintsugi}"
py="${KINTSUGI_PYTHON:-/usr/bin/python3}"   # Debian's interpreter by default: the python3 on PATH may lack numpy
if ! "$py" -c 'import numpy, pytest' 2>/dev/null; then
  echo "crosscheck: $py has no numpy/pytest (apt-get install python3-numpy python3-pytest); skipping"
  exit 77
fi
if [ ! -x "$KINTSUGI" ]; then
  echo "crosscheck: no kintsugi binary at $KINTSUGI"
  exit 1
fi
cd "$root" || exit 1
# no cache directory in the source tree, no bytecode next to the sources
PYTHONDONTWRITEBYTECODE=1 exec "$py" -m pytest -q -p no:cacheprovider "$here" "$@"
