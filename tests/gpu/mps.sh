# Sourced: CUDA MPS for one-GPU multi-rank runs, so the ranks' kernels run
# at once instead of time-slicing. with_mps CMD... starts a control daemon
# with its pipe and log directories under /tmp, runs CMD, and always quits
# the daemon again; the command's exit status is returned.
with_mps() {
  local dir
  dir=$(mktemp -d /tmp/pb-mps.XXXXXX)
  mkdir -p "$dir/pipe" "$dir/log"
  export CUDA_MPS_PIPE_DIRECTORY="$dir/pipe" CUDA_MPS_LOG_DIRECTORY="$dir/log"
  if ! nvidia-cuda-mps-control -d; then
    echo "with_mps: nvidia-cuda-mps-control -d failed" >&2
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    return 1
  fi
  local rc=0
  "$@" || rc=$?
  echo quit | nvidia-cuda-mps-control
  sleep 1
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  return $rc
}
