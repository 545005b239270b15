#!/usr/bin/env bash
# Makes the virtual environment the Python package builds and tests in:
# ${PLUGBOARD_VENV:-.venv} with pybind11, NumPy, pytest and setuptools, cuobjdump/nvdisasm
# (PyPI's NVIDIA wheels, where the CUDA toolkit lacks them), and PyTorch
# (PyPI's wheel, CPU use only; PLUGBOARD_SKIP_TORCH=1 leaves it out, and
# the torch tests then skip saying so). Installs by name, skips what is
# there, so running it again is quick. tools/build.sh builds the package
# against this environment when it exists.
#   bash tools/python-env.sh [--build-only]
# --build-only: just what the build needs (pybind11 and the rest, no PyTorch
# and no cuobjdump), so tools/test.sh can fetch those while it builds.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${PLUGBOARD_VENV:-.venv}
python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null; then
  bash tools/install-deps.sh
  apt-get install -y -qq --no-install-recommends python3 python3-venv python3-dev
fi
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" || { apt-get install -y -qq --no-install-recommends python3-venv python3-dev && "$python" -m venv "$venv"; }
fi
# setuptools: `pip install ./python` (the DSL) builds with it; Python >= 3.12 venvs lack it.
packages=(pybind11 numpy pytest setuptools)
build_only=0
[ "${1:-}" = --build-only ] && build_only=1
[ "${PLUGBOARD_SKIP_TORCH:-0}" = 1 ] || [ $build_only = 1 ] || packages+=(torch)
missing=()
for p in "${packages[@]}"; do
  "$venv/bin/python" -c "import $p" 2>/dev/null || missing+=("$p")
done
# cuobjdump and nvdisasm (the SwitchChannel SASS check) where the toolkit lacks them.
if [ $build_only = 0 ] && [ ! -x "${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump" ] && ! ls "$venv"/lib/python3*/site-packages/nvidia/cu13/bin/cuobjdump >/dev/null 2>&1; then
  missing+=(nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "python-env: installing ${missing[*]} into $venv"
  "$venv/bin/python" -m pip install -q "${missing[@]}"
else
  echo "python-env: $venv has ${packages[*]}"
fi
