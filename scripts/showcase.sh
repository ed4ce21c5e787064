#!/usr/bin/env bash
# The main job: installs what is missing, builds, then compiles causal attention and runs it on
# random inputs, verified against the exact fp64 reference and timed: on the GPU when the CUDA
# driver finds one, else on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
example=examples/attention/prefill_causal.te
target=cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  target=cuda
fi
echo
echo "== $example (--target $target)"
sed -n '/^s\[/,$p' "$example"
echo
./build/bin/kintsugi run "$example" --target "$target" --verify --bench --shape S=256,T=256
