#!/usr/bin/env bash
# README command 1: install dependencies, build, and run the main job.
#  - With GPUs (nvidia-smi -L lists at least one): the GPU collective sweep
#    on every local GPU, one rank per GPU (two ranks share a single GPU),
#    beside NCCL when plugboard-perf finds it (--compare nccl).
#  - Otherwise: a 4-rank benchmark on host memory over this machine's
#    default transport (loopback through the ethernet plugin).
# Extra arguments go to plugboard-perf (e.g. -C allgather, --csv out.csv).
set -euo pipefail
cd "$(dirname "$0")/.."
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
# The GPU parts need nvcc at configure time; CUDA's usual home is not always on PATH.
if [ "$gpus" -ge 1 ] && ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
bash tools/install-deps.sh
bash tools/build.sh
build=${PLUGBOARD_BUILD_DIR:-build}
perf="$build/bin/plugboard-perf"

if [ "$gpus" -lt 1 ]; then
  echo "main job: no GPU (nvidia-smi lists none); host buffers, 4 ranks"
  exec "$perf" --mem host --nranks 4 -b 8 -e 16M -f 4 "$@"
fi

ranks=$(( gpus >= 2 ? gpus : 2 ))
compare=()
if [ "$gpus" -lt 2 ]; then
  echo "main job: 1 GPU, so 2 ranks share it; no NCCL comparison (NCCL refuses two ranks on one GPU)"
elif found=$("$perf" --find-nccl 2>&1); then
  echo "main job: $gpus GPUs, $ranks ranks; comparing with $found"
  compare=(--compare nccl)
else
  echo "main job: $gpus GPUs, $ranks ranks; NCCL not found, so no comparison:"
  echo "$found"
fi
exec "$perf" --mem gpu --nranks "$ranks" -b 8 -e 1G -f 2 "${compare[@]}" "$@"
