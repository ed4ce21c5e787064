#!/usr/bin/env bash
# The compile-time validation cost of every example at benchmark sizes: the seconds the schedule's
# validation and the tile program's validation take (`kintsugi lower --print trace`), each with
# the on-disk record of passed validations out of the way (a fresh cache directory).
#   scripts/validation_cost.sh KINTSUGI_BINARY [TARGET]
set -euo pipefail
bin="$1" target="${2:-cuda}"
cd "$(dirname "$0")/.."
cache="$(mktemp -d)"
trap 'rm -rf "$cache"' EXIT
attention="B=1,S=4096,T=4096,D=128"
printf '%-28s %-8s %10s %10s %10s\n' example target schedule_ms tiles_ms total_ms
for f in examples/attention/*.te examples/norm/*.te examples/performer.te; do
  case "$f" in
    *decode*) shape="B=1,S=1,T=32768,D=128" ;;
    *attention*) shape="$attention" ;;
    *performer*) shape="B=1,H=8,S=4096,T=4096,D=128,R=128" ;;
    *) shape="M=4096,N=8192" ;;
  esac
  if [[ "$f" == *attention* ]]; then
    if grep -q "HQ" "$f"; then shape="$shape,HQ=32,HK=8"; else shape="$shape,H=8"; fi
  fi
  KINTSUGI_CACHE_DIR="$cache" "$bin" lower "$f" --print trace --target "$target" --shape "$shape" \
    2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
s = j.get("validation", {}).get("seconds", 0.0) * 1e3
t = j.get("tile_validation", {}).get("seconds", 0.0) * 1e3
print("%-28s %-8s %10.0f %10.0f %10.0f" % (sys.argv[1], sys.argv[2], s, t, s + t))' \
    "$(basename "$f" .te)" "$target"
done
