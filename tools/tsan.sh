#!/usr/bin/env bash
# The host code under ThreadSanitizer: builds a third tree without CUDA
# (./build-tsan, or $PLUGBOARD_TSAN_BUILD_DIR) and runs its unit,
# multi-process (libfabric's too, since session 34: 9 tests, ~18 test-seconds)
# and ethernet/faulty/libfabric/ucx plugin tests (ucx since session 39); any data race
# or lock-order report fails the test that printed it (halt_on_error).
# tools/test.sh runs it (PLUGBOARD_SKIP_TSAN=1 leaves it out), so CI does.
#   bash tools/tsan.sh [ctest arguments...]
# libfabric is not instrumented: tools/tsan-suppressions.txt ignores the
# calls it makes (its copies of peer data are ordered by atomics TSan cannot
# see) and says what that costs. UCX is instrumented no more than libfabric,
# but runs with its interceptors on (no called_from_lib for it): a peer's
# bytes reach us through UCX's socket calls, which TSan counts as ordering
# (all sockets share one sync object), and ignoring them hid that order
# and reported our active-message handler's copies as races. Left out,
# with the reason: the GPU tests (no CUDA here); the ucx tests whose signal
# is UCX's own atomic (protocol=rma: the conformance ordering test with
# fence, the pipelined-signals test with flush and fence): UCX's put
# handler copies the data and its atomic orders it, both in its code, so
# TSan sees the copy and not the release (a report every run; suppressing
# ucp_put_handler made TSan so slow on each of its copies that the test
# ran past 120 s on a busy machine; tools/tsan-ucx.sh runs them against a
# UCX built with TSan, not in CI); the install,
# namespace and conformance tests (the same code paths
# as the tests that run, for minutes more); and the host collectives' 2-
# and 5-rank cases (the 3-, 4- and 8-rank cases run every code path those
# do; under TSan the 2- and 5-rank cases were 300 of the stage's 790
# test-seconds). UCX's memory hooks (libucm) crash TSan's pthread
# interceptors when a thread exits, so every test runs with them off.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PLUGBOARD_TSAN_BUILD_DIR:-build-tsan}
san="-fsanitize=thread -fno-omit-frame-pointer"
bash tools/sanitized-build.sh "$build" "$san"
# second_deadlock_stack: both stacks of a lock-order report.
# atexit_sleep_ms=0: TSan's exit (and _exit) sleeps 1 s by default while other
# threads run, so a rank that "dies" with _exit kept its transport threads
# serving peers for a second (LibfabricComm.APeerThatDiesDuringLaneWritesIsNamed
# saw its 3.2 GB complete, CI stop 45); tests mean _exit to end a process at once.
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:atexit_sleep_ms=0:history_size=4:suppressions=$PWD/tools/tsan-suppressions.txt}
export UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no
ctest --test-dir "$build" --output-on-failure --timeout 600 -j "${PLUGBOARD_TEST_JOBS:-2}" -L "unit|multiproc|plugin" \
  -E "SignalBecomesVisibleOnlyAfterEarlierWrites/ucx_rma_fence|PipelinedSignalsNeverOvertakeTheirWrites/rma_|^plugin_check|HostCollectives(Direct)?Test\.[A-Za-z]+/[25]ranks" "$@"
