#!/usr/bin/env bash
# Configures and builds Plugboard into ./build (or $PLUGBOARD_BUILD_DIR).
# Extra arguments go to CMake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PLUGBOARD_BUILD_DIR:-build}
jobs=${PLUGBOARD_JOBS:-$(nproc)}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPLUGBOARD_WERROR=ON "$@"
cmake --build "$build" -j "$jobs"
