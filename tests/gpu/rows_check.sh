#!/usr/bin/env bash
# Row reductions on the GPU: every norm example and softmax at the sizes of issue 24's table
# (M x N in {64, 4096} x {8192}, softmax also 4096 x 4096), with --target cuda --bench (verified
# against the fp64 reference in the same run), then the copy of the same bytes by PyTorch as the
# roof. One line per run: example, sizes, milliseconds, GB/s (bytes read and written once).
# --full runs issue 24's grid instead: M in {1, 64, 4096, 32768} x N in {1024, 8192, 131072} for
# every example, and N = 32000 for softmax.
#   tests/gpu/rows_check.sh [KINTSUGI_BINARY] [--full]
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$(realpath -m -- "${1:-$root/build/bin/kintsugi}")"
export KINTSUGI_CACHE_DIR="${KINTSUGI_CACHE_DIR:-$(mktemp -d)}"
status=0
# example | shape | bytes read and written (inputs once, outputs once)
runs=(
  "layernorm|M=64,N=8192|$((64 * 8192 * 4))"
  "layernorm|M=4096,N=8192|$((4096 * 8192 * 4))"
  "l2norm|M=64,N=8192|$((64 * 8192 * 4))"
  "l2norm|M=4096,N=8192|$((4096 * 8192 * 4))"
  "rmsnorm_quant|M=64,N=8192|$((64 * 8192 * 3))"
  "rmsnorm_quant|M=4096,N=8192|$((4096 * 8192 * 3))"
  "softmax|M=64,N=8192|$((64 * 8192 * 8))"
  "softmax|M=4096,N=4096|$((4096 * 4096 * 8))"
  "softmax|M=4096,N=8192|$((4096 * 8192 * 8))"
)
if [ "${2:-}" = --full ]; then
  runs=()
  # bytes an element: inputs read and outputs written once (f16 in and out: 4; f32: 8; f16 -> i8: 3)
  for ex in layernorm:4 l2norm:4 rmsnorm_quant:3 softmax:8; do
    for m in 1 64 4096 32768; do
      ns="1024 8192 131072"
      [ "${ex%:*}" = softmax ] && ns="$ns 32000"
      for n in $ns; do runs+=("${ex%:*}|M=$m,N=$n|$((m * n * ${ex#*:}))"); done
    done
  done
fi
for r in "${runs[@]}"; do
  IFS='|' read -r ex shape bytes <<<"$r"
  out="$("$bin" run "$root/examples/norm/$ex.te" --target cuda --shape "$shape" --bench 2>&1)"
  if ! grep -q "verified against the exact reference" <<<"$out"; then
    echo "$ex $shape: FAILED"
    echo "$out" | tail -5
    status=1
    continue
  fi
  ms="$(grep -oP 'time: \K[0-9.e+-]+' <<<"$out")"
  warn="$(grep -c '^warning' <<<"$out")"
  echo "$ex $shape: $ms ms, $(python3 -c "print(round($bytes / $ms / 1e6, 1))") GB/s ($warn warnings)"
done
python3 - <<'EOF'
import torch, triton.testing as tt
for n in (64 * 8192 * 2, 4096 * 8192 * 2, 4096 * 8192 * 4):
    x = torch.empty(n, dtype=torch.uint8, device="cuda")
    ms = tt.do_bench(lambda: x.clone(), warmup=25, rep=100, return_mode="median")
    print(f"copy of {2 * n} bytes (read + write): {ms:.4f} ms, {2 * n / ms / 1e6:.1f} GB/s")
EOF
exit $status
