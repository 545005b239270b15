#!/usr/bin/env bash
# One command for the lent GPU machine: configure and build (CMake + ninja,
# sm_90), run the GPU tests, the host test suites and the GPU
# microbenchmarks; write every log under $OUT; print a summary table last.
#   OUT=/some/dir bash tests/gpu/run.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
build=${PLUGBOARD_GPU_BUILD_DIR:-build-gpu}
jobs=$(nproc)
# Safety on shared machines: never create NVLink multicast objects.
export NCCL_NVLS_ENABLE=0 PLUGBOARD_NVLS_ENABLE=0

summary="$OUT/summary.tsv"
printf "step\tresult\tseconds\tdetail\n" > "$summary"

# step NAME COMMAND...: runs it with its log in $OUT/NAME.log, records the result.
step() {
  local name=$1; shift
  local start=$(date +%s) result=PASS
  "$@" > "$OUT/$name.log" 2>&1 || result=FAIL
  local detail=$(grep -E "tests passed|PASSED|FAILED|_median|_us " "$OUT/$name.log" | tail -3 | tr '\n' ' ' | tr '\t' ' ')
  printf "%s\t%s\t%s\t%s\n" "$name" "$result" "$(( $(date +%s) - start ))" "$detail" >> "$summary"
}

{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvcc --version | tail -1; \
  echo "commit ${RUN_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"; } > "$OUT/machine.txt" 2>&1

step configure cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLUGBOARD_ENABLE_CUDA=ON \
  -DPLUGBOARD_CUDA_ARCHITECTURES=90
step build cmake --build "$build" -j "$jobs"
step gpu-tests ctest --test-dir "$build" -L gpu --output-on-failure --timeout 300
step host-tests ctest --test-dir "$build" -LE gpu -j 8 --output-on-failure --timeout 300
step fifo-latency "$build/bin/plugboard-bench-fifo-latency" 20000
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then step channels "$build/bin/plugboard-bench-channels"; fi

echo
echo "== machine"; cat "$OUT/machine.txt"
echo "== microbenchmarks"; grep -h -E "_us|GBps|_over_" "$OUT/fifo-latency.log" "$OUT/channels.log" 2>/dev/null
echo "== summary (logs in $OUT)"
column -t -s $'\t' "$summary" 2>/dev/null || cat "$summary"
! grep -q $'\tFAIL\t' "$summary"
