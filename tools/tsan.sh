#!/usr/bin/env bash
# The host code under ThreadSanitizer: builds a third tree without CUDA
# (./build-tsan, or $PLUGBOARD_TSAN_BUILD_DIR) and runs its unit,
# multi-process and ethernet/faulty plugin tests; any data race or
# lock-order report fails the test that printed it (halt_on_error).
# tools/test.sh runs it (PLUGBOARD_SKIP_TSAN=1 leaves it out), so CI does.
#   bash tools/tsan.sh [ctest arguments...]
# Left out, with the reason: the GPU tests (no CUDA here); the libfabric
# and ucx tests, and the mixed-transport ones that use both (their
# libraries are not instrumented: a signal UCX applies in its own code is
# invisible to TSan, so the data it orders reads as a race, seen in
# TransportOrderingTest over ucx rma); the install, namespace and
# conformance tests (the same code paths as the tests that run, for
# minutes more); and the host collectives' 2- and 5-rank cases (the 3-,
# 4- and 8-rank cases run every code path those do; under TSan the 2- and
# 5-rank cases were 300 of the stage's 790 test-seconds). UCX's memory
# hooks (libucm) crash TSan's pthread interceptors when a thread exits, so
# tests that merely load the ucx plugin (Loader, 'auto') run with them off.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PLUGBOARD_TSAN_BUILD_DIR:-build-tsan}
san="-fsanitize=thread -fno-omit-frame-pointer"
bash tools/sanitized-build.sh "$build" "$san"
# second_deadlock_stack: both stacks of a lock-order report.
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:history_size=4}
export UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no
ctest --test-dir "$build" --output-on-failure --timeout 600 -j "${PLUGBOARD_TEST_JOBS:-2}" -L "unit|multiproc|plugin" \
  -E "[Uu]cx|[Ll]ibfabric|^plugin_check|^MixedTransports\.|HostCollectives(Direct)?Test\.[A-Za-z]+/[25]ranks" "$@"
