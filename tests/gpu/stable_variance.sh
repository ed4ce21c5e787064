#!/usr/bin/env bash
# Layer norm on rows far from zero, on the GPU: the example (f16 input) and the same program with
# an f32 input, under split-K (M=8) and the rolling update (M=4096) at N=10000, and computed whole
# at N=1024, for |mean| / std of 0, 1e2, 1e3 (f16 resolves no more) and 1e4 (f32), and constant
# rows. Each run is verified against the exact interpreter on the same inputs (kintsugi run
# --inputs DIR --verify); the line prints the max relative error, and the script fails when one
# exceeds 1e-3 or does not verify.
#   tests/gpu/stable_variance.sh [KINTSUGI_BINARY] [--target cuda|cpu]
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$(realpath -m -- "${1:-$root/build/bin/kintsugi}")"
target="${2:-cuda}"
work="$(mktemp -d)"
export KINTSUGI_CACHE_DIR="${KINTSUGI_CACHE_DIR:-$work/cache}"
sed 's/^input X: f16\[M, N\]/input X: f32[M, N]/' "$root/examples/norm/layernorm.te" >"$work/layernorm_f32.te"
fail=0
for x in f16 f32; do
  te="$root/examples/norm/layernorm.te"
  [ "$x" = f32 ] && te="$work/layernorm_f32.te"
  # 1024 columns: a row computed whole on CUDA; 10000: fused in strips.
  for mn in 8:1024 4096:1024 8:10000 4096:10000; do
    m="${mn%:*}" n="${mn#*:}"
    for ratio in 0 100 1000 10000 const100 const10000; do
      [ "$x" = f16 ] && [ "$ratio" = 10000 ] && continue
      dir="$work/in_${x}_${m}_${n}_${ratio}"
      mkdir -p "$dir"
      python3 - "$dir" "$x" "$m" "$n" "$ratio" <<'EOF'
import sys
import numpy as np
d, x, m, n, ratio = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
rng = np.random.default_rng(5)
if ratio.startswith("const"):
    X = np.full((m, n), float(ratio[5:]))
else:
    sign = np.where(np.arange(m) % 2 == 0, 1.0, -1.0)[:, None]
    X = float(ratio) * sign + rng.standard_normal((m, n))
np.save(f"{d}/X.npy", X.astype(np.float16 if x == "f16" else np.float32))
np.save(f"{d}/G.npy", rng.standard_normal(n).astype(np.float16))
np.save(f"{d}/Beta.npy", rng.standard_normal(n).astype(np.float16))
EOF
      out="$("$bin" run "$te" --target "$target" --inputs "$dir" --verify --json 2>"$work/err")"
      line="$(printf '%s' "$out" | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
    ok = d["verified"] and d["max_rel_err"] <= 1e-3 and not d["warnings"]
    print(("ok   " if ok else "FAIL ") + "%.2e" % d["max_rel_err"], " ".join(d["schedule"][:2]),
          *d["warnings"])
except Exception:
    print("FAIL no result")')"
      echo "layernorm X:$x M=$m N=$n |mean|/std=$ratio: $line $(head -c 300 "$work/err")"
      [[ "$line" == ok* ]] || fail=1
    done
  done
done
rm -rf "$work"
exit $fail
