#!/usr/bin/env bash
# A/B of ethernet.caller_send_bytes on the host path (issue 13): builds
# plugboard-perf and the ethernet plugin with tests/gpu/run.sh's build, then
# runs bench/run-host-bench.sh at 2 and 8 ranks with caller_send_bytes=auto
# and =all, alternating, ROUNDS times. Tables under $OUT/r<round>-<mode>-<n>.
#   RUN_COMMIT=<commit> OUT=/some/dir bash bench/ab-caller-send.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
build=${PLUGBOARD_GPU_BUILD_DIR:-build-gpu}
RUN_COMMIT=${RUN_COMMIT:-} BUILD_TARGETS="plugboard-perf plugboard-ethernet" RUN_ONLY='^none$' OUT=$OUT/build \
  bash tests/gpu/run.sh > /dev/null 2>&1
for round in $(seq "${ROUNDS:-2}"); do
  for n in 2 8; do
    for mode in auto all; do
      PLUGBOARD_ETHERNET_CALLER_SEND_BYTES=$mode SKIP_DEPS=1 NO_BUILD=1 PLUGBOARD_BUILD_DIR=$build \
        PLUGBOARD_COMMIT=${RUN_COMMIT:-} NRANKS=$n MAX_BYTES=16M ITERS=50 OUT_DIR=$OUT/r$round-$mode-$n \
        bash bench/run-host-bench.sh > "$OUT/r$round-$mode-$n.log" 2>&1
      echo "round $round n=$n mode=$mode rc=$?"
      grep -E "^## |^#   vs openmpi" "$OUT/r$round-$mode-$n/table.txt"
    done
  done
done
rm -rf "$OUT"/*/bin
