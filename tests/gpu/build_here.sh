#!/usr/bin/env bash
# Builds Kintsugi from this tree (or from SOURCE_DIR, another tree carried along: the other side of
# an A/B, bench/attention_bench.py --also) on a GPU machine without a package registry: unpacks
# the Debian packages that scripts/gpu_debs.sh downloaded into this tree's build/debs (carried
# there) into a private prefix, never into /, and configures against it, with the Python module
# for this machine's python3. The binaries find libfmt through their build-tree RPATH.
# KINTSUGI_TARGETS, when set, builds only those targets (e.g. "kintsugi_cli", the command line tool alone).
#   tests/gpu/build_here.sh [BUILD_DIR [SOURCE_DIR]]   (default build-gpu of SOURCE_DIR, this tree)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
src="$(realpath -- "${2:-$root}")"
build="$(realpath -m -- "${1:-$src/build-gpu}")"
debs="$root/build/debs"
prefix="$build/deps"
ls "$debs"/*.deb >/dev/null 2>&1 || { echo "no packages in $debs: run scripts/gpu_debs.sh" >&2; exit 1; }
mkdir -p "$prefix"
for f in "$debs"/*.deb; do dpkg -x "$f" "$prefix"; done
# The system's compilers, whatever CC and CXX say: a toolchain of its own (CXX=/opt/gcc/bin/g++
# there) links its C++ runtime into the Python module, which then crashes once PyTorch loads the
# system's libstdc++ after it.
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER="$(command -v gcc)" -DCMAKE_CXX_COMPILER="$(command -v g++)" \
  -DCMAKE_PREFIX_PATH="$prefix/usr" -DKINTSUGI_BUILD_PYTHON=ON \
  -DPython_EXECUTABLE="$(command -v python3)" >/dev/null
cmake --build "$build" -j "$(nproc)" ${KINTSUGI_TARGETS:+--target $KINTSUGI_TARGETS}
# A copy of the tree may carry a stale .git: KINTSUGI_COMMIT, when set, names the commit.
echo "built $build (commit ${KINTSUGI_COMMIT:-$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)})"
