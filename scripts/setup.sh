#!/usr/bin/env bash
# Installs the Debian packages Kintsugi needs (only those missing) and builds it into build/.
# Used by scripts/showcase.sh and scripts/test.sh; safe to run again (incremental). Arguments are
# passed to the CMake configure step (scripts/test.sh adds -DKINTSUGI_BUILD_PYTHON=ON).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ ccache libgtest-dev libcli11-dev libfmt-dev nlohmann-json3-dev
          llvm-14-tools clang-format-19 python3 python3-numpy python3-pytest python3-dev
          pybind11-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j "$jobs"
