#!/usr/bin/env bash
# The shipped execution plans on host buffers beside the built-in host
# collectives, Open MPI and Gloo, in one job (docs/perf/2026-11-26-host-plans.md):
#   bash bench/plans-host.sh [build dir]     (4 ranks, 8 KiB - 4 MiB, ethernet on loopback)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
for c in allreduce allgather; do
  for program in ${c}_ring ${c}_allpairs; do
    echo "== plan $program"
    PLUGBOARD_TRANSPORTS=ethernet "$build/bin/plugboard-perf" --mem host --nranks 4 -C "$c" \
      --plan "plans/$program/4ranks.json" -b 8K -e 4M -f 8 -n 20 -w 3 | grep -E "^ +[0-9]"
  done
done
echo "== built-in, Open MPI, Gloo"
out=$(mktemp -d)
NRANKS=4 MIN_BYTES=8K MAX_BYTES=4M ITERS=20 WARMUP=3 NO_BUILD=1 PLUGBOARD_BUILD_DIR="$build" \
  PLUGBOARD_COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" OUT_DIR="$out" \
  bash bench/run-host-bench.sh > "$out/run.log" 2>&1
sed -n '/## allreduce/,/^$/p;/## allgather/,/^$/p' "$out/table.txt"
