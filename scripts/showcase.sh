#!/usr/bin/env bash
# The main job: installs what is missing, builds, then compiles causal attention and runs it on
# random inputs, verified against the exact fp64 reference and timed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
example=examples/attention/prefill_causal.te
echo
echo "== $example"
sed -n '/^s\[/,$p' "$example"
echo
./build/bin/kintsugi run "$example" --verify --bench --shape S=256,T=256
