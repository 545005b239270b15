#!/usr/bin/env bash
# The host code under ThreadSanitizer: builds a third tree without CUDA
# (./build-tsan, or $PLUGBOARD_TSAN_BUILD_DIR) and runs its unit,
# multi-process (libfabric's too, since session 34: 9 tests, ~18 test-seconds)
# and ethernet/faulty/libfabric plugin tests; any data race
# or lock-order report fails the test that printed it (halt_on_error).
# tools/test.sh runs it (PLUGBOARD_SKIP_TSAN=1 leaves it out), so CI does.
#   bash tools/tsan.sh [ctest arguments...]
# libfabric is not instrumented: tools/tsan-suppressions.txt ignores the
# calls it makes (its copies of peer data are ordered by atomics TSan cannot
# see) and says what that costs. Left out, with the reason: the GPU tests
# (no CUDA here); the ucx tests, and the mixed-transport ones that use it
# (the same blindness, and more: its active-message handler stores a peer's
# data in our progress thread in an order only the peer's process makes,
# and under TSan its ordering tests ran past 300 s); the install,
# namespace and conformance tests (the same code paths
# as the tests that run, for minutes more); and the host collectives' 2-
# and 5-rank cases (the 3-, 4- and 8-rank cases run every code path those
# do; under TSan the 2- and 5-rank cases were 300 of the stage's 790
# test-seconds). UCX's memory hooks (libucm) crash TSan's pthread
# interceptors when a thread exits, so tests that merely load the ucx
# plugin (Loader, 'auto') run with them off.
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
  -E "[Uu]cx|^plugin_check|^MixedTransports\.|HostCollectives(Direct)?Test\.[A-Za-z]+/[25]ranks" "$@"
