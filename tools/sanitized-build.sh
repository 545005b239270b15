#!/usr/bin/env bash
# Configures and builds the host code (no CUDA) with sanitizer flags into a
# tree of its own; tools/sanitize.sh (ASan + UBSan) and tools/tsan.sh (TSan)
# call it.
#   bash tools/sanitized-build.sh BUILD_DIR "SANITIZER FLAGS"
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: sanitized-build.sh BUILD_DIR FLAGS}
san=${2:?usage: sanitized-build.sh BUILD_DIR FLAGS}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPLUGBOARD_ENABLE_CUDA=OFF -DPLUGBOARD_BUILD_PYTHON=OFF -DPLUGBOARD_WERROR=ON \
  -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="$san" \
  -DCMAKE_SHARED_LINKER_FLAGS="$san" -DCMAKE_MODULE_LINKER_FLAGS="$san"
cmake --build "$build" -j "${PLUGBOARD_JOBS:-$(nproc)}"
