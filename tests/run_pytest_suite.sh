#!/usr/bin/env bash
# Runs one NumPy-referenced pytest suite of tests/ (crosscheck, generality) against a kintsugi binary.
#   tests/run_pytest_suite.sh SUITE_DIR [KINTSUGI_BINARY] [extra pytest arguments...]
# The binary defaults to $KINTSUGI, then build/bin/kintsugi. KINTSUGI_TARGET (default cpu) and
# KINTSUGI_CACHE_DIR pass through; KINTSUGI_PYTHON picks the interpreter. Exit status: pytest's
# (0 = all passed); 77 when Debian's python3 lacks numpy or pytest (ctest reports a skip).
set -u
suite="$(cd "$1" && pwd)"
shift
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name="$(basename "$suite")"
if [ $# -ge 1 ]; then
  KINTSUGI="$(realpath -m -- "$1")"
  shift
fi
export KINTSUGI="${KINTSUGI:-$root/build/bin/kintsugi}"
py="${KINTSUGI_PYTHON:-/usr/bin/python3}"   # Debian's interpreter by default: the python3 on PATH may lack numpy
if ! "$py" -c 'import numpy, pytest' 2>/dev/null; then
  echo "$name: $py has no numpy/pytest (apt-get install python3-numpy python3-pytest); skipping"
  exit 77
fi
if [ ! -x "$KINTSUGI" ]; then
  echo "$name: no kintsugi binary at $KINTSUGI"
  exit 1
fi
cd "$root" || exit 1
# no cache directory in the source tree, no bytecode next to the sources
PYTHONDONTWRITEBYTECODE=1 exec "$py" -m pytest -q -p no:cacheprovider "$suite" "$@"
