#!/usr/bin/env bash
# Runs the Python binding tests (for ctest, label python).
#   tests/python/run.sh PYTHON MODULE_DIR [extra pytest arguments...]
# PYTHON: the interpreter the module was built for; MODULE_DIR: the directory that holds the
# kintsugi package (<build>/python). KINTSUGI_CACHE_DIR passes through. Exit status: pytest's
# (0 = all passed); 77 when the interpreter lacks numpy or pytest (ctest reports a skip).
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
py="$1"
module_dir="$(realpath -m -- "$2")"
shift 2
if ! "$py" -c 'import numpy, pytest' 2>/dev/null; then
  echo "python: $py has no numpy/pytest (apt-get install python3-numpy python3-pytest); skipping"
  exit 77
fi
cd "$root" || exit 1
# no cache directory in the source tree, no bytecode next to the sources
PYTHONPATH="$module_dir${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1 \
  exec "$py" -m pytest -q -p no:cacheprovider "$here" "$@"
