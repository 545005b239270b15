#!/usr/bin/env bash
# Latency of the pipelined collective kernels at one mid size on the lent
# 2-GPU machine: every collective at LAT_BYTES (default 64 KiB) with the LL
# thresholds at 0 (so allreduce, reduce and broadcast take their pipelines:
# two-shot unless the case says one-shot), then allreduce with fewer blocks
# and threads, and the LL kernel at its defaults. Differences between rows
# place the fixed cost: sendrecv is one hop, allgather two stages, two-shot
# allreduce three.
#   OUT=/some/dir bash tests/gpu/latency.sh   (after tests/gpu/run.sh built build-gpu)
source "$(dirname "$0")/bench-env.sh"
bytes=${LAT_BYTES:-64K}
table="$OUT/latency.tsv"
printf "case\tcollective\tsettings\ttime_us\n" > "$table"

# probe NAME COLLECTIVE [VAR=VALUE...] [PERF_OPTIONS...]: out-of-place time of one size
# (the first word starting with '-' begins the perf options).
probe() {
  local name=$1 coll=$2 vars=() args=()
  shift 2
  for a in "$@"; do [[ "$a" == -* || ${#args[@]} -gt 0 ]] && args+=("$a") || vars+=("$a"); done
  env "${vars[@]}" timeout 60 "$perf" --mem gpu --nranks 2 -C "$coll" -b "$bytes" -e "$bytes" -n 200 -w 20 -c 0 \
    "${args[@]}" > "$OUT/lat-$name.log" 2>&1
  local t=$(awk '!/^#/ && NF > 8 && $6 ~ /^[0-9.]+$/ {print $6}' "$OUT/lat-$name.log" | tail -1)
  printf "%s\t%s\t%s\t%s\n" "$name" "$coll" "${*:-defaults}" "${t:-FAIL}" >> "$table"
}

pipes=(PLUGBOARD_GPU_ALLREDUCE_SMALL_BYTES=0 PLUGBOARD_GPU_BROADCAST_SMALL_BYTES=0 PLUGBOARD_GPU_ALLREDUCE_ONESHOT_BYTES=0)
for c in sendrecv allgather alltoall broadcast reducescatter reduce allreduce; do probe "$c" "$c" "${pipes[@]}"; done
probe allreduce-oneshot allreduce PLUGBOARD_GPU_ALLREDUCE_SMALL_BYTES=0 PLUGBOARD_GPU_ALLREDUCE_ONESHOT_BYTES=1073741824
probe allreduce-ll allreduce
probe allreduce-graph allreduce "${pipes[@]}" -G 5
probe sendrecv-graph sendrecv -G 5
probe allreduce-t64 allreduce "${pipes[@]}" PLUGBOARD_GPU_THREADS=64
probe allreduce-b1 allreduce "${pipes[@]}" PLUGBOARD_GPU_BLOCKS=1 PLUGBOARD_GPU_SCRATCH_BYTES=4194304
probe allreduce-b1-t64 allreduce "${pipes[@]}" PLUGBOARD_GPU_BLOCKS=1 PLUGBOARD_GPU_THREADS=64 PLUGBOARD_GPU_SCRATCH_BYTES=4194304
probe allreduce-b8 allreduce "${pipes[@]}" PLUGBOARD_GPU_BLOCKS=8 PLUGBOARD_GPU_SCRATCH_BYTES=33554432
probe sendrecv-b1 sendrecv PLUGBOARD_GPU_BLOCKS=1 PLUGBOARD_GPU_SCRATCH_BYTES=4194304
column -t -s $'\t' "$table" 2>/dev/null || cat "$table"
