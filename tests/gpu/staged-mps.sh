#!/usr/bin/env bash
# GPU buffers over a transport (ethernet unless PLUGBOARD_TRANSPORTS
# names another; through the pinned host port area),
# two ranks (NRANKS) on one GPU under CUDA MPS (or spread over the GPUs, rank r on GPU r % GPUs): the cases that have deadlocked, and
# every collective at odd sizes with its results checked. Each case is
# bounded in time; its outcome takes one line (ok with the times, or the
# ranks' errors, which say where the network path stood).
#   bash tests/gpu/staged-mps.sh BUILD_DIR
# Call it under MPS (tests/gpu/mps.sh: with_mps). Exits non-zero when any
# case failed or hung.
set -uo pipefail
build=${1:?usage: staged-mps.sh BUILD_DIR}
perf="$build/bin/plugboard-perf"
export PLUGBOARD_TRANSPORTS=${PLUGBOARD_TRANSPORTS:-ethernet}  # a PLUGBOARD_CONFIG's rules still apply
export PLUGBOARD_GPU_WAIT_TIMEOUT=${PLUGBOARD_GPU_WAIT_TIMEOUT:-5}
export PLUGBOARD_TIMEOUT=${PLUGBOARD_TIMEOUT:-10}
export NCCL_NVLS_ENABLE=0 PLUGBOARD_NVLS_ENABLE=0
failures=0
shown_pairs=0
log=$(mktemp /tmp/pb-staged.XXXXXX)
trap 'rm -f "$log"' EXIT

# run_case ARGS...: one plugboard-perf run, bounded by `timeout 60`.
run_case() {
  local start=$SECONDS rc=0
  timeout 60 "$perf" --mem gpu --nranks "${NRANKS:-2}" -C allreduce -n 5 -w 1 "$@" > "$log" 2>&1 || rc=$?
  local took=$((SECONDS - start))
  local checked=1
  [[ " $* " == *" -c 1 "* ]] && ! grep -q "Out of bounds values : 0 OK" "$log" && checked=0
  if [ $rc -eq 0 ] && [ $checked -eq 1 ]; then
    echo "ok ($took s): $*"
    # The first case that passes shows which transport each pair took.
    [ $shown_pairs -eq 0 ] && { grep -E "^#  rank .* via " "$log" | awk '{print "    " $0}'; shown_pairs=1; }
    grep -E "^ +[0-9]" "$log" | awk '{print "    " $0}'
  else
    failures=$((failures + 1))
    [ $rc -eq 124 ] && echo "HUNG (killed after $took s): $*" || echo "FAIL (rc $rc, $took s): $*"
    grep -iE "error|timed out|timeout|Out of bounds" "$log" | head -4 | cut -c1-1500 | awk '{print "    " $0}'
  fi
}

run_case -b 1M -e 1M -c 0
run_case -b 1M -e 1M -c 1
run_case -b 64K -e 64K -c 1
run_case -b 256K -e 256K -c 1
run_case -b 1K -e 4M -f 4 -c 1
# Every collective, odd sizes through every chunking (one message per peer
# below 64 KiB, up to gpu_port_blocks chunks, wrapping slots), checked.
run_case -o max -b 1028 -e 8M -f 17 -c 1
run_case -d half -b 1026 -e 8M -f 17 -c 1
for c in allgather reducescatter broadcast reduce alltoall sendrecv; do
  run_case -C "$c" -b 1028 -e 8M -f 17 -c 1
done
# Rank blocks of odd bytes (not a multiple of 8), another op and type.
run_case -C allgather -d int8 -b 1027 -e 8M -f 17 -c 1
run_case -C alltoall -d int8 -b 1027 -e 8M -f 17 -c 1
run_case -C reducescatter -d half -o max -b 1026 -e 8M -f 17 -c 1
# Captured in a CUDA graph (with failover: the pieces' copies and kernels as graph nodes).
run_case -b 1M -e 16M -f 4 -G 2 -c 1
echo "staged-mps: $failures failure(s)"
[ $failures -eq 0 ]
