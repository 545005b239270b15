# Sourced by the GPU benchmark scripts (tune.sh, latency.sh, profile.sh):
# the repository root as working directory, $OUT (created), $build and
# $perf, and NVLink multicast off in NCCL and Plugboard (shared GPUs: never
# create multicast objects there).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
build=${PLUGBOARD_GPU_BUILD_DIR:-build-gpu}
export NCCL_NVLS_ENABLE=0 PLUGBOARD_NVLS_ENABLE=0
perf="$build/bin/plugboard-perf"
