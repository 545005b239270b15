#!/usr/bin/env bash
# GPU buffers over the faulty transport wrapping ethernet (issue 15), two
# ranks on one GPU under CUDA MPS: with every operation delayed, the staged
# cases of staged-mps.sh must give checked, correct results; with a failed
# operation, a rank that exits, or signals dropped for good, both ranks'
# GPU allreduces must end (no hang: each run is bounded by `timeout 90`)
# with an error naming the rank at fault; with `failover` on, GPU calls
# of every size go on over ethernet. One line per case; exits non-zero
# when any case failed or hung.
#   bash tests/gpu/faulty-mps.sh BUILD_DIR      (under with_mps)
# FAULTY_LOG_DIR=DIR keeps each fault case's whole output there (FAULT.log),
# for reading where its time went (with PLUGBOARD_DEBUG=INFO and
# PLUGBOARD_DEBUG_TIMESTAMPS=1 every line carries the time).
set -uo pipefail
build=${1:?usage: faulty-mps.sh BUILD_DIR}
build=$(readlink -f "$build")
export PLUGBOARD_PLUGIN_PATH="$build/lib/plugboard-faults" PLUGBOARD_TRANSPORTS=faulty PLUGBOARD_FAULTY_INNER=ethernet
export PLUGBOARD_TIMEOUT=10 PLUGBOARD_GPU_WAIT_TIMEOUT=10 NCCL_NVLS_ENABLE=0 PLUGBOARD_NVLS_ENABLE=0
[ -e "$PLUGBOARD_PLUGIN_PATH/libplugboard-faulty.so" ] || { echo "faulty-mps: no faulty plugin in $build"; exit 1; }
failures=0
log=$(mktemp /tmp/pb-faulty.XXXXXX)
trap 'rm -f "$log"' EXIT

echo "== delay 200 us on every operation: staged cases, results checked"
PLUGBOARD_FAULTY_FAULT=delay PLUGBOARD_FAULTY_COUNT=0 PLUGBOARD_FAULTY_DELAY_US=200 \
  bash "$(dirname "$0")/staged-mps.sh" "$build" || failures=$((failures + 1))

# expect_named_failure FAULT "VAR=value ..." ERE...: a 1 MiB GPU allreduce
# loop with the fault on rank 1 must fail (not hang), and its output must
# match every ERE (rank 0's own error names rank 1 and its host, as "rank 1 (host h)" or "rank 1 (h)").
expect_named_failure() {
  local fault=$1 vars=$2; shift 2
  local start=$SECONDS rc=0 missing=""
  # shellcheck disable=SC2086
  env PLUGBOARD_FAULTY_FAULT="$fault" PLUGBOARD_FAULTY_RANKS=1 PLUGBOARD_FAULTY_AFTER=40 $vars \
    timeout 90 "$build/bin/plugboard-perf" --mem gpu --nranks 2 -C allreduce -b 1M -e 1M -n 200 -w 2 \
    > "$log" 2>&1 || rc=$?
  local took=$((SECONDS - start))
  [ -n "${FAULTY_LOG_DIR:-}" ] && mkdir -p "$FAULTY_LOG_DIR" && cp "$log" "$FAULTY_LOG_DIR/$fault.log"
  for re in "$@"; do grep -qE -- "$re" "$log" || missing="$missing '$re'"; done
  if [ $rc -eq 124 ]; then
    failures=$((failures + 1)); echo "HUNG (killed after $took s): $fault"
  elif [ $rc -eq 0 ]; then
    failures=$((failures + 1)); echo "FAIL: $fault: the run succeeded"
  elif [ -n "$missing" ]; then
    failures=$((failures + 1)); echo "FAIL: $fault: rc $rc after $took s, nothing matches$missing"
  else
    echo "ok ($took s, rc $rc): $fault ends with errors naming rank 1"
  fi
  grep -E "^plugboard-perf: rank" "$log" | head -4 | cut -c1-400 | awk '{print "    " $0}'
}

rank0_names_rank1='plugboard-perf: rank 0: .*rank 1 \((host )?[a-z0-9.-]+\)'
echo "== faults on rank 1 during GPU allreduces (1 MiB)"
expect_named_failure fail_op "" "$rank0_names_rank1" 'plugboard-perf: rank 1: .*injected fail_op'
expect_named_failure exit "PLUGBOARD_FAULTY_EXIT_CODE=23" "$rank0_names_rank1"
expect_named_failure drop "PLUGBOARD_FAULTY_COUNT=0 PLUGBOARD_FAULTY_OPS=signal" "$rank0_names_rank1"
# With `failover` on and the rule [faulty, ethernet], a failed operation on
# rank 1 moves the pair to ethernet. With failover every GPU call on a pair
# through the proxy goes through the host relay (above gpu_host_relay_bytes
# in pieces of its 4 MiB area), whose host collectives fail over: each loop
# must finish with every result right and the move logged.
# expect_failover AFTER PERF-ARGS...: the fault strikes rank 1's AFTER-th operation.
expect_failover() {
  local after=$1; shift
  local yaml start=$SECONDS rc=0
  yaml=$(mktemp /tmp/pb-failover.XXXXXX)
  printf 'failover: true\nrules:\n  - peers: any\n    use: [faulty, ethernet]\n' > "$yaml"
  env -u PLUGBOARD_TRANSPORTS PLUGBOARD_CONFIG="$yaml" PLUGBOARD_FAULTY_FAULT=fail_op PLUGBOARD_FAULTY_RANKS=1 \
    PLUGBOARD_FAULTY_AFTER="$after" timeout 120 "$build/bin/plugboard-perf" --mem gpu --nranks 2 -w 2 -c 1 "$@" \
    > "$log" 2>&1 || rc=$?
  rm -f "$yaml"
  if [ $rc -ne 0 ] || ! grep -q "Out of bounds values : 0 OK" "$log" || ! grep -q "failing over to ethernet" "$log"; then
    failures=$((failures + 1)); echo "FAIL: failover (fault after $after operations) $*: rc $rc after $((SECONDS - start)) s"
    tail -20 "$log" | cut -c1-300 | awk '{print "    " $0}'
  else
    echo "ok ($((SECONDS - start)) s): failover (fault after $after operations) $*: the pair moved, every result right"
    grep -E "failing over|Out of bounds" "$log" | head -3 | cut -c1-300 | awk '{print "    " $0}'
  fi
}
echo "== failover on, rule [faulty, ethernet]: GPU calls go on over ethernet, checked"
expect_failover 40 -C allreduce -b 8 -e 64K -f 4 -n 50
# Large calls, in pieces: the fault strikes inside the first 16 MiB call's pieces.
for c in allreduce allgather reducescatter alltoall broadcast reduce sendrecv; do
  expect_failover 60 -C "$c" -b 16M -e 16M -n 4
done
expect_failover 200 -C allreduce -d half -o max -b 1026 -e 8M -f 17 -n 4

echo "faulty-mps: $failures failure(s)"
[ $failures -eq 0 ]
