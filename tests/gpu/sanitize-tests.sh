#!/usr/bin/env bash
# compute-sanitizer over the GPU tests themselves: their ranks are forked
# before the parent touches CUDA (tests/multiproc/multiproc.hpp), so
# `--target-processes all` instruments every rank (sanitize-ranks.sh covers
# plugboard-perf's ranks started by exec). Without MPS (the tools do not
# run under it): the ranks' kernels time-slice, waits get 300 s and the
# tests' own rank limits 8 times theirs. A
# rank's report lines appear as they happen and a finding fails the test
# (--error-exitcode 9 ends that rank); the ranks leave by _exit, so only
# the parent prints a summary. One line per tool and test.
#   bash tests/gpu/sanitize-tests.sh BUILD_DIR [TOOL:GTEST_FILTER ...]
set -u
build=${1:?usage: sanitize-tests.sh BUILD_DIR [TOOL:FILTER ...]}
shift
cases=("$@")
# "timeouts": the tests that wait for a timeout, an abort or a peer's
# notice (the waits the tests set themselves, 0.1-30 s, stay: overrides win
# over the environment's 300 s), memcheck over each group, racecheck and
# synccheck over the abort of skipped calls. A filter never mixes tests
# that fork their ranks with tests that use CUDA in the parent (GpuFifo):
# ranks forked after that hang.
if [ "${cases[0]:-}" = timeouts ]; then
  cases=(
    memcheck:GpuFifo.FullQueueWithoutConsumerEndsInReportedError:GpuFifo.AbortReleasesWaitingProducers
    memcheck:GpuMemoryChannel.WaitWithoutSignalEndsInReportedError
    memcheck:GpuCollectives.RankSkippingACallEndsInAReportedTimeout:GpuCollectives.AbortEndsKernelsWaitingForARankThatSkips
    memcheck:GpuCollectives.ARankThatFails*:GpuCollectives.ACommunicatorsReportedFailureEndsAWaitingCall
    memcheck:GpuCollectivesPort.RankSkipping*:GpuCollectivesPort.Abort*
    memcheck:GpuPlan.RankSkipping*:GpuPlan.APeersReportedFailureEndsARunWaitingForIt:GpuPlanSelection.AFailedPlanCallEndsThePeersPlanCalls
    memcheck:GpuSwitch.SizesThatDifferBetweenRanksFailOnEveryRank
    racecheck:GpuCollectives.AbortEndsKernelsWaitingForARankThatSkips
    synccheck:GpuCollectives.AbortEndsKernelsWaitingForARankThatSkips)
fi
[ ${#cases[@]} -gt 0 ] || cases=(
  memcheck:GpuCollectives.ReducingCollectivesMatchReferenceTwoRanks
  racecheck:GpuCollectives.ReducingCollectivesMatchReferenceTwoRanks
  synccheck:GpuCollectives.ReducingCollectivesMatchReferenceTwoRanks
  memcheck:GpuCollectives.MovingCollectivesAndSendRecvMatchReferenceTwoRanks
  racecheck:GpuCollectives.MovingCollectivesAndSendRecvMatchReferenceTwoRanks
  memcheck:GpuCollectivesPort.SendRecvRingOverStagedEthernetTwoRanks)
sanitizer=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
logs=${LOG_DIR:-$(mktemp -d)}
mkdir -p "$logs"
export PLUGBOARD_GPU_WAIT_TIMEOUT=300 PLUGBOARD_TIMEOUT=300 NCCL_NVLS_ENABLE=0 PLUGBOARD_NVLS_ENABLE=0
# The tests' own limits on their forked ranks (tests/multiproc): memcheck
# made a 3-rank sweep outrun its 110 s.
export PB_TEST_TIMEOUT_SCALE=${PB_TEST_TIMEOUT_SCALE:-8}
status=0
for c in "${cases[@]}"; do
  tool=${c%%:*} filter=${c#*:}
  log="$logs/$tool-${filter//[\/*:]/_}.log"  # parameterized names have slashes; filters stars and colons
  start=$(date +%s)
  timeout "${SANITIZE_TIMEOUT:-300}" "$sanitizer" --tool "$tool" --target-processes all --error-exitcode 9 \
    "$build/bin/plugboard_gpu_tests" --gtest_filter="$filter" > "$log" 2>&1
  rc=$?
  summary=$(grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1 | sed 's/^=* *//')
  findings=$(grep -cE "^========= +(Invalid|Race|Barrier|Error|Program hit)" "$log")
  echo "$tool $filter: rc=$rc, $(( $(date +%s) - start )) s, [${summary:-no summary}], finding lines: $findings"
  [ "$rc" = 0 ] && [ "$findings" = 0 ] || status=1
done
exit $status
