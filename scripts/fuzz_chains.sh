#!/usr/bin/env bash
# Runs the differential chain fuzzer (tests/fuzz/chain_fuzz_test.cpp) at length, on demand: JOBS
# workers in parallel, each running batches of CHAINS programs, one seed a batch
# (SEED0 + 1000 * worker + batch), until SECONDS_LEFT have passed. Prints each batch's statistics
# line and a total; exits 1 when any batch failed (its repro lines are in the output).
#   scripts/fuzz_chains.sh FUZZ_BINARY [JOBS [SECONDS_LEFT [SEED0 [CHAINS]]]]
set -u
bin="$1" jobs="${2:-$(nproc)}" budget="${3:-600}" seed0="${4:-100}" chains="${5:-100}"
out="$(mktemp -d)"
end=$(( $(date +%s) + budget ))
worker() {
  local w="$1" b=0
  while [ "$(date +%s)" -lt "$end" ]; do
    local seed=$(( seed0 + 1000 * w + b ))
    if KINTSUGI_FUZZ_SEED=$seed KINTSUGI_FUZZ_CHAINS=$chains timeout $(( end - $(date +%s) + 5 )) \
        "$bin" --gtest_filter='chain_fuzz.SchedulesAgreeWithTheInterpreter' >"$out/$seed.log" 2>&1; then
      echo "seed $seed: $(grep -m1 'programs' "$out/$seed.log")"
    elif grep -q 'programs' "$out/$seed.log"; then
      echo "seed $seed FAILED: $(grep -m1 'programs' "$out/$seed.log")"
      grep -E 'Failure|repro|KINTSUGI_FUZZ' "$out/$seed.log" | head -20
    else
      echo "seed $seed: cut off by the time limit"
    fi
    b=$(( b + 1 ))
  done
}
for w in $(seq 0 $(( jobs - 1 ))); do worker "$w" & done
wait
echo "== logs in $out"
! grep -l FAILED "$out"/*.log >/dev/null 2>&1
