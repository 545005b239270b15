#!/usr/bin/env bash
# README command 2: install dependencies (tools/python-env.sh makes .venv for
# the Python package and its pytest suite), build, and run every test, then
# the host tests once more under ASan + UBSan (tools/sanitize.sh;
# PLUGBOARD_SKIP_SANITIZERS=1 leaves that out), under ThreadSanitizer
# (tools/tsan.sh; PLUGBOARD_SKIP_TSAN=1 leaves that out), then each libFuzzer target
# for FUZZ_SECONDS (15 here: twelve targets, two at a time, within CI's
# 40 minutes; tools/fuzz.sh alone defaults to 30) from its seed corpus
# (tools/fuzz.sh; PLUGBOARD_SKIP_FUZZ=1 leaves that out).
# GPU tests skip themselves (with the reason) where there is no CUDA device.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's wall time, so CI's budget (40 minutes) can be watched.
stage() { echo "== test.sh: $1 done at $SECONDS s"; }
bash tools/install-deps.sh
stage "install-deps"
# The Python package's environment: what the build needs first, then
# PyTorch and cuobjdump (downloads, mostly) while the build runs.
bash tools/python-env.sh --build-only
python_env_log=$(mktemp)
bash tools/python-env.sh > "$python_env_log" 2>&1 &
python_env=$!
trap 'kill $python_env 2> /dev/null || true' EXIT
bash tools/build.sh "$@"
stage build
wait $python_env || { cat "$python_env_log"; echo "test.sh: tools/python-env.sh failed"; exit 1; }
cat "$python_env_log"
stage python-env
build=${PLUGBOARD_BUILD_DIR:-build}
# The ABI header must stay plain C99.
gcc -std=c99 -pedantic -Werror -Wall -Wextra -fsyntax-only -x c plugin-api/include/plugboard/transport.h
ctest --test-dir "$build" --output-on-failure --timeout 300 -j "${PLUGBOARD_TEST_JOBS:-2}"
stage tests
# The host code again under AddressSanitizer + UndefinedBehaviorSanitizer.
[ "${PLUGBOARD_SKIP_SANITIZERS:-0}" = 1 ] || bash tools/sanitize.sh
stage asan
# And under ThreadSanitizer (data races, lock order).
[ "${PLUGBOARD_SKIP_TSAN:-0}" = 1 ] || bash tools/tsan.sh
stage tsan
# Fuzzing: the YAML config, the bootstrap's and the ethernet plugin's wire formats.
[ "${PLUGBOARD_SKIP_FUZZ:-0}" = 1 ] || FUZZ_SECONDS=${FUZZ_SECONDS:-15} bash tools/fuzz.sh
stage fuzz
