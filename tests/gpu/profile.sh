#!/usr/bin/env bash
# Nsight Compute figures for the GPU collectives where they trail NCCL, on
# the lent 2-GPU machine. Rank 0 runs under ncu, rank 1 plainly (started
# as a launcher would: PLUGBOARD_RANK / PLUGBOARD_NRANKS / MASTER_ADDR).
# Only a few single-pass metrics are asked for and the application runs
# once (--replay-mode application, --cache-control none), so ncu never
# saves, restores or replays a kernel: a replayed collective kernel would
# wait for a peer that is not replaying it. (The default kernel replay mode
# failed with "Failed to profile reduceKernel".) `--clock-control none`, as
# these machines require. Each case is bounded by 60 s.
#   OUT=/some/dir bash tests/gpu/profile.sh   (after tests/gpu/run.sh built build-gpu)
# PROFILE_ONLY=<extended regex> profiles only the cases whose names match.
# Writes <case>.csv (ncu) and the ranks' logs under $OUT; prints a table last.
source "$(dirname "$0")/bench-env.sh"
ncu=${NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)}
[ -n "$ncu" ] && [ -x "$ncu" ] || { echo "profile.sh: ncu not found (set NCU=/path/to/ncu)"; exit 2; }
# One pass must collect every metric: application replay of a second pass
# fails (the peer rank has exited). NCU_METRICS adds to the list at that risk.
metrics=${NCU_METRICS:-gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread}
port=29600

# profile NAME KERNEL_REGEX PERF_ARGS...: 5 launches of the kernel after 20, on rank 0.
profile() {
  local name=$1 kernel=$2
  shift 2
  [[ -n "${PROFILE_ONLY:-}" && ! "$name" =~ $PROFILE_ONLY ]] && return 0
  port=$((port + 1))
  local common=(PLUGBOARD_NRANKS=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port)
  env "${common[@]}" PLUGBOARD_RANK=1 PLUGBOARD_LOCAL_RANK=1 timeout 60 "$perf" "$@" > "$OUT/$name-rank1.log" 2>&1 &
  env "${common[@]}" PLUGBOARD_RANK=0 PLUGBOARD_LOCAL_RANK=0 timeout 60 "$ncu" --clock-control none --target-processes application-only --replay-mode application \
    --cache-control none \
    --metrics "$metrics" -k "regex:$kernel" --launch-skip 20 --launch-count 5 --csv \
    "$perf" "$@" > "$OUT/$name.csv" 2> "$OUT/$name-rank0.log"
  local rc=$?
  wait
  echo "$name: ncu exit $rc"
}

profile allreduce-8B llKernel --mem gpu -C allreduce -b 8 -e 8 -n 50 -w 5 -c 0
profile allreduce-256K llKernel --mem gpu -C allreduce -b 256K -e 256K -n 50 -w 5 -c 0
profile sendrecv-64K sendRecvKernel --mem gpu -C sendrecv -b 64K -e 64K -n 50 -w 5 -c 0
profile allreduce-64M reduceKernel --mem gpu -C allreduce -b 64M -e 64M -n 50 -w 5 -c 0
profile sendrecv-1G sendRecvKernel --mem gpu -C sendrecv -b 1G -e 1G -n 10 -w 2 -c 0

echo "== metrics (rank 0; one row per profiled launch and metric)"
for f in "$OUT"/*.csv; do
  echo "-- $(basename "$f" .csv)"
  grep -E '^"[0-9]' "$f" | awk -F'","' '{print $(NF-2), $(NF-1), $NF}' | tr -d '"' | sort | uniq | head -20
done
