#!/usr/bin/env bash
# Row reductions on the GPU: every norm example, softmax and the corpus's cross-entropy at the
# sizes of issue 24's table, with --target cuda --bench (verified against the float64 NumPy
# reference in the same run: bench/generality_bench.py --program), then PyTorch's eager and
# torch.compile times and the copy of the same bytes (bench/rows_torch.py) in the same process
# tree. Prints one line per Kintsugi run as it goes,
# then a Markdown table: milliseconds, Kintsugi's GB/s (bytes read and written once), its
# fraction of the copy's bandwidth, and its speed against torch.compile.
# --full runs issue 24's grid instead: M in {1, 64, 4096, 32768} x N in {1024, 8192, 131072} for
# every example, and N = 32000 for softmax and cross-entropy; --only CASE,... keeps the grid's rows
# of those examples; --cases CASE:M:N,... runs those.
#   tests/gpu/rows_check.sh [KINTSUGI_BINARY] [--full] [--only CASE,...] [--cases C:M:N,...]
#                           [--no-torch]
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$(realpath -m -- "${1:-$root/build/bin/kintsugi}")"
export KINTSUGI_CACHE_DIR="${KINTSUGI_CACHE_DIR:-$(mktemp -d)}"
full=0 torch=1 only="" given=""
args=("$@")
for ((k = 1; k < ${#args[@]}; ++k)); do
  case "${args[k]}" in
    --full) full=1 ;;
    --no-torch) torch=0 ;;
    --only) only="${args[k + 1]}" ;;
    --cases) given="${args[k + 1]}" ;;
  esac
done
status=0
# bytes an element: inputs read and outputs written once (f16 in and out: 4; f32: 8; f16 -> i8: 3;
# cross-entropy reads an f32 row and writes one number)
declare -A per_element=([layernorm]=4 [l2norm]=4 [rmsnorm_quant]=3 [softmax]=8 [cross_entropy]=4)
te_of() {
  if [ "$1" = cross_entropy ]; then echo "$root/tests/generality/cross_entropy.te"; else
    echo "$root/examples/norm/$1.te"; fi
}
cases=(layernorm:64:8192 layernorm:4096:8192 l2norm:64:8192 l2norm:4096:8192
  rmsnorm_quant:64:8192 rmsnorm_quant:4096:8192 softmax:64:8192 softmax:4096:4096
  softmax:4096:8192 cross_entropy:4096:32000)
if [ $full = 1 ]; then
  cases=()
  for ex in layernorm l2norm rmsnorm_quant softmax cross_entropy; do
    for m in 1 64 4096 32768; do
      ns="1024 8192 131072"
      case $ex in softmax | cross_entropy) ns="$ns 32000" ;; esac
      for n in $ns; do cases+=("$ex:$m:$n"); done
    done
  done
fi
if [ -n "$only" ]; then
  kept=()
  for c in "${cases[@]}"; do [[ ",$only," == *",${c%%:*},"* ]] && kept+=("$c"); done
  cases=("${kept[@]}")
fi
[ -n "$given" ] && IFS=, read -r -a cases <<<"$given"
results="$(mktemp)"
for c in "${cases[@]}"; do
  IFS=: read -r ex m n <<<"$c"
  # Verified against the float64 NumPy reference of the program (seconds at every size of the
  # grid, where the exact interpreter takes about a minute at 32768 x 8192), then timed.
  if ! out="$(python3 "$root/bench/generality_bench.py" --kintsugi "$bin" --program "$(te_of "$ex")" \
    --sizes "M=$m,N=$n" 2>&1)"; then
    echo "$ex M=$m,N=$n: FAILED"
    echo "$out" | tail -5
    status=1
    continue
  fi
  read -r ms warn < <(python3 -c 'import json, sys; r = json.loads(sys.argv[1].splitlines()[-1]); print(r["ms"], len(r["warnings"]))' "$out")
  echo "$ex M=$m,N=$n: $ms ms ($warn warnings)"
  echo "$ex $m $n $ms $((m * n * ${per_element[$ex]}))" >>"$results"
done
peers="$(mktemp)"
if [ $torch = 1 ]; then
  python3 "$root/bench/rows_torch.py" "${cases[@]}" >"$peers" || status=1
fi
python3 - "$results" "$peers" <<'EOF'
import json, sys
peers = {}
for line in open(sys.argv[2]):
    r = json.loads(line)
    peers[(r["case"], r["M"], r["N"])] = r
print("| case | M x N | Kintsugi ms | GB/s | of copy | torch.compile ms | eager ms | copy ms | compile / Kintsugi |")
print("|---|---|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    ex, m, n, ms, nbytes = line.split()
    m, n, ms, nbytes = int(m), int(n), float(ms), int(nbytes)
    p = peers.get((ex, m, n))
    f = lambda v: f"{v:.4f}" if p else "-"
    cells = [ex, f"{m} x {n}", f"{ms:.4f}", f"{nbytes / ms / 1e6:.0f}",
             f"{p['copy_ms'] / ms:.2f}" if p else "-", f(p and p["compile_ms"]),
             f(p and p["eager_ms"]), f(p and p["copy_ms"]),
             f"{p['compile_ms'] / ms:.2f}" if p else "-"]
    print("| " + " | ".join(cells) + " |")
EOF
exit $status
