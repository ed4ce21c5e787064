#!/usr/bin/env bash
# The GPU acceptance run of the CUDA back end on one machine: every example verified on the GPU
# (default, odd and fully masked sizes), compute-sanitizer memcheck, racecheck and synccheck on
# the fused prefill kernels at odd sizes and on decode at head_dim 128 (grouped-query: 8 query heads a
# chunk's rows; causal at T=10000: the combine over column blocks streams its partials through
# two cp.async slots for more than one tile), the device primitive tests, and the Python
# binding on PyTorch CUDA tensors (the module of a build made on this machine by
# tests/gpu/build_here.sh, else one that tests/gpu/build_python.sh builds against a carried
# library).
# Prints one summary line per part; exits non-zero if any part fails.
#   tests/gpu/final_check.sh [BUILD_DIR]
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(realpath -m -- "${1:-$root/build}")"
bin="$build/bin/kintsugi"
export KINTSUGI_CACHE_DIR="${KINTSUGI_CACHE_DIR:-$(mktemp -d)}"
status=0
part() {  # name, command...
  local name="$1"; shift
  if "$@" > "/tmp/final_$name.log" 2>&1; then echo "$name: ok"; else echo "$name: FAILED"; tail -15 "/tmp/final_$name.log"; status=1; fi
}
part examples bash "$root/tests/gpu/run_examples.sh" "$bin"
grep "gpu examples" /tmp/final_examples.log
for tool in memcheck racecheck synccheck; do
  for case in "prefill_causal.te --shape H=2,S=1000,T=1000" "prefill_windowed.te --shape S=48,T=80 --param W=16" \
              "prefill_gqa.te --shape S=130,T=70" \
              "decode_gqa.te --shape B=1,HQ=64,HK=8,S=1,D=128,T=1000" \
              "decode_causal.te --shape B=1,H=2,S=1,D=128,T=10000"; do
    # shellcheck disable=SC2086
    part "sanitizer_${tool}_${case%%.te*}" compute-sanitizer --tool "$tool" --error-exitcode 3 \
      "$bin" run "$root/examples/attention/"$case --target cuda --verify
  done
done
part gpu_tests "$build/tests/kintsugi_gpu_tests" --gtest_brief=1
# The module of a build made here (tests/gpu/build_here.sh), else one built against the library.
ext="$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
pypath="$build/python"
if [ ! -f "$pypath/kintsugi/_core$ext" ]; then
  part python_build bash "$root/tests/gpu/build_python.sh" "$build"
  pypath="$build/python-gpu"
fi
part python_cuda env PYTHONPATH="$pypath" python3 -m pytest -q -p no:cacheprovider \
  "$root/tests/python/test_cuda.py"
grep -E "passed|failed|skipped" /tmp/final_python_cuda.log | tail -1
exit $status
