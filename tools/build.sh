#!/usr/bin/env bash
# Configures and builds Plugboard into ./build (or $PLUGBOARD_BUILD_DIR).
# Extra arguments go to CMake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PLUGBOARD_BUILD_DIR:-build}
jobs=${PLUGBOARD_JOBS:-$(nproc)}
# The Python package builds against the environment of tools/python-env.sh.
python_args=()
venv=${PLUGBOARD_VENV:-.venv}
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import pybind11" 2>/dev/null; then
  python_args=(-DPython_EXECUTABLE="$(cd "$venv" && pwd)/bin/python" -Dpybind11_DIR="$("$venv/bin/python" -m pybind11 --cmakedir)")
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPLUGBOARD_WERROR=ON "${python_args[@]}" "$@"
cmake --build "$build" -j "$jobs"
