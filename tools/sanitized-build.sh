#!/usr/bin/env bash
# Configures and builds the host code (no CUDA) with sanitizer flags into a
# tree of its own; tools/sanitize.sh (ASan + UBSan) and tools/tsan.sh (TSan)
# call it.
# Optimized with -O1 and line tables only (-g1): enough for file:line in every
# report, and on CI's 2 cores a quarter of the compile time of -O2 -g under
# ASan + UBSan (30.7 s -> 6.6 s for communicator.cpp).
#   bash tools/sanitized-build.sh BUILD_DIR "SANITIZER FLAGS"
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: sanitized-build.sh BUILD_DIR FLAGS}
san=${2:?usage: sanitized-build.sh BUILD_DIR FLAGS}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DPLUGBOARD_ENABLE_CUDA=OFF -DPLUGBOARD_BUILD_PYTHON=OFF -DPLUGBOARD_WERROR=ON \
  -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="$san" \
  -DCMAKE_SHARED_LINKER_FLAGS="$san" -DCMAKE_MODULE_LINKER_FLAGS="$san"
cmake --build "$build" -j "${PLUGBOARD_JOBS:-$(nproc)}"
