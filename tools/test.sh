#!/usr/bin/env bash
# README command 2: install dependencies, build, and run every test.
# GPU tests skip themselves (with the reason) where there is no CUDA device.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
bash tools/build.sh "$@"
build=${PLUGBOARD_BUILD_DIR:-build}
# The ABI header must stay plain C99.
gcc -std=c99 -pedantic -Werror -Wall -Wextra -fsyntax-only -x c plugin-api/include/plugboard/transport.h
ctest --test-dir "$build" --output-on-failure --timeout 300 -j "${PLUGBOARD_TEST_JOBS:-2}"
