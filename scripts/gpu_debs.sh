#!/usr/bin/env bash
# Downloads the Debian packages the build needs beyond a CUDA image with CMake, ninja, a C++
# compiler and Python (fmt, CLI11, nlohmann-json, GoogleTest) into build/debs, for a GPU machine
# that has no package registry: carry build/debs there and build with tests/gpu/build_here.sh.
#   scripts/gpu_debs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/debs
cd build/debs
# apt-get download writes into the current directory; as root it warns that the _apt user cannot.
apt-get download libfmt-dev libfmt9 libcli11-dev nlohmann-json3-dev libgtest-dev 2>&1 |
  grep -v "unsandboxed as root" || true
ls -1 ./*.deb
