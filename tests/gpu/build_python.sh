#!/usr/bin/env bash
# Builds the Python module for the GPU machine's own interpreter against a library built
# elsewhere (that machine has no package registry: no fmt, CLI11 or json packages to build the
# library itself). Needs: <build>/src/libkintsugi.a and <build>/src/support/Version.h from a build
# of this tree, nlohmann's headers in <build>/deps/include, and pybind11 importable by python3.
# Writes <build>/python-gpu/kintsugi/ (put <build>/python-gpu on PYTHONPATH).
#   tests/gpu/build_python.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(realpath -m -- "${1:-$root/build}")"
out="$build/python-gpu/kintsugi"
mkdir -p "$out"
cp "$root"/python/kintsugi/*.py "$out/"
ext="$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
# shellcheck disable=SC2046
g++ -std=c++20 -O2 -shared -fPIC -fvisibility=hidden -w \
    -I"$root/include" -I"$root/src" -I"$build/src" -I"$build/deps/include" \
    $(python3 -m pybind11 --includes) "$root"/python/src/*.cpp \
    "$build/src/libkintsugi.a" -L"${CUDA_HOME:-/usr/local/cuda}/lib64" -lnvrtc -ldl -lpthread \
    -Wl,-rpath,"${CUDA_HOME:-/usr/local/cuda}/lib64" -o "$out/_core$ext"
echo "built $out/_core$ext"
