#!/usr/bin/env bash
# Decode in split-K chunks of 1, 2, 4 and 8 key tiles (--chunk-tiles), each walked with the
# rolling update, or of the size the compiler chooses (auto): the benchmark (every output
# verified against the float64 reference before it is timed) and Nsight Compute's time per
# kernel for each setting, on a GPU machine.
#   bench/decode_chunks.sh BINARY OUT_DIR [LENGTHS [SETTINGS]]
#   (LENGTHS: default 32768,131072; SETTINGS: default "auto 1 2 4 8")
set -u
bin="$1"
out="$2"
lengths="${3:-32768,131072}"
settings="${4:-auto 1 2 4 8}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$out"
for ct in $settings; do
  echo "=== chunks of $ct tiles"
  python3 "$root/bench/attention_bench.py" --kintsugi "$bin" --chunk-tiles "$ct" \
    --ops decode_gqa,decode_softcap,decode_causal,decode_alibi --prefill "" --decode "$lengths" \
    --json "$out/chunks_$ct.json" 2>&1 | grep -E "kintsugi|Error"
  for op in "decode_gqa B=1,HQ=64,HK=8,S=1,D=128,T=32768" \
            "decode_softcap B=1,HQ=32,HK=16,S=1,D=128,T=32768" \
            "decode_causal B=1,H=32,S=1,D=128,T=32768"; do
    set -- $op
    echo "--- $1 (ncu)"
    ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size \
      "$bin" run "$root/examples/attention/$1.te" --target cuda --chunk-tiles "$ct" --shape "$2" 2>&1 |
      grep -E "^  ks_|duration|registers|grid_size" | sed 's/  */ /g'
  done
done
