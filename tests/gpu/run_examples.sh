#!/usr/bin/env bash
# Runs every example on the GPU with --target cuda --verify at its default sizes, at odd sizes
# (prefill S=T=1000, decode T=1000, norms M=37,N=1000), at long ones for the split-K programs
# (decode T=32768, norms M=4,N=65536: their combines walk wide tiles on 256 or 512 threads),
# decode in chunks of four key tiles walked with the rolling update (--chunk-tiles 4, T=1000: the
# last chunk's last tile empty, and T=32768) and, for the windowed program, with fully masked
# leading key tiles (S=48, T=80, W=16); prints one line per run and a summary, and exits non-zero
# if any run fails to verify.
#   tests/gpu/run_examples.sh [KINTSUGI_BINARY]      (jobs in parallel: $JOBS, default 8)
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$(realpath -m -- "${1:-$root/build/bin/kintsugi}")"
export KINTSUGI_CACHE_DIR="${KINTSUGI_CACHE_DIR:-$(mktemp -d)}"
runs=()
for f in "$root"/examples/attention/*.te "$root"/examples/norm/*.te "$root"/examples/performer.te; do
  n="$(basename "$f" .te)"
  long=""
  case "$n" in
    prefill*|performer) odd="--shape S=1000,T=1000" ;;
    decode*) odd="--shape T=1000" long="--shape T=32768" ;;
    *) odd="--shape M=37,N=1000" long="--shape M=4,N=65536" ;;
  esac
  runs+=("$f|" "$f|$odd")
  [ -n "$long" ] && runs+=("$f|$long")
  case "$n" in
    decode*) runs+=("$f|--chunk-tiles 4 --shape T=1000" "$f|--chunk-tiles 4 --shape T=32768") ;;
  esac
  [ "$n" = prefill_windowed ] && runs+=("$f|--shape S=48,T=80 --param W=16")
done
one() {
  local f="${1%%|*}" extra="${1#*|}"
  # shellcheck disable=SC2086
  local ef
  ef="$(mktemp)"
  out="$("$bin" run "$f" --target cuda --verify --json $extra 2>"$ef")"
  verdict="$(printf '%s' "$out" | python3 -c 'import json,sys
try:
    d = json.load(sys.stdin)
    print("ok" if d["verified"] else "WRONG", "%.2e" % d["max_rel_err"], d["arch"], d["form"])
except Exception:
    print("ERROR")' 2>/dev/null)"
  [ "${verdict%% *}" = ok ] || { printf '%s\n' "$out"; tail -5 "$ef"; } >&2
  rm -f "$ef"
  printf '%-18s %-34s %s\n' "$(basename "$f" .te)" "${extra:-default}" "$verdict"
}
export -f one
export bin
printf '%s\n' "${runs[@]}" | xargs -P "${JOBS:-8}" -I{} bash -c 'one "$@"' _ {} | sort > /tmp/gpu_examples.txt
cat /tmp/gpu_examples.txt
total=$(wc -l < /tmp/gpu_examples.txt)
good=$(grep -c ' ok ' /tmp/gpu_examples.txt)
echo "gpu examples: $good of $total verified"
[ "$good" = "$total" ]
