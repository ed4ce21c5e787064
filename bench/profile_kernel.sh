#!/usr/bin/env bash
# Profiles one compiled kernel with Nsight Compute on the GPU: the example's first launch at the
# given shape (no verification and no timing of record: bench/attention_bench.py does those),
# with the sections that explain a compute-bound kernel's time (occupancy, warp stalls, issue
# slots, pipe utilisation); the process is ended once that launch is profiled.
#   bench/profile_kernel.sh EXAMPLE.te SHAPE [KINTSUGI_BINARY]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
te="$1" shape="$2" bin="${3:-$root/build/bin/kintsugi}"
ncu --launch-count 1 --kill yes --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section LaunchStats --section ComputeWorkloadAnalysis \
    --section InstructionStats --section MemoryWorkloadAnalysis \
    "$bin" run "$te" --target cuda --shape "$shape"
