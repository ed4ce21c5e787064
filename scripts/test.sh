#!/usr/bin/env bash
# The test suite: installs what is missing, builds, runs every CTest tier that this machine can run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh -DKINTSUGI_BUILD_PYTHON=ON  # the Python module too: ctest label python
export KINTSUGI_CACHE_DIR="$PWD/build/kernel-cache"
ctest --test-dir build -j "$(nproc 2>/dev/null || echo 2)" --output-on-failure
