#!/usr/bin/env bash
# compute-sanitizer over plugboard-perf's GPU collectives with every rank
# started by exec, each under its own compute-sanitizer (the tools do not
# follow ranks forked after the parent initialised CUDA: racecheck and
# synccheck fail them at cudaSetDevice). Ranks find each other through
# PLUGBOARD_RANK / PLUGBOARD_NRANKS / PLUGBOARD_BOOTSTRAP_ADDR on loopback;
# results are checked (-c 1); waits get 300 s (sanitized kernels are slow).
#   bash tests/gpu/sanitize-ranks.sh <build-dir> <memcheck|racecheck|synccheck|initcheck> [nranks] [collective...]
# Prints one line per collective: the tool's summary per rank, and FAIL when
# a rank's exit status is not 0 (a finding exits 9, a wrong value 1).
set -u
build=${1:?usage: sanitize-ranks.sh <build-dir> <tool> [nranks] [collective...]}
tool=${2:?tool}
n=${3:-2}
shift $(( $# < 3 ? $# : 3 ))
colls=("$@")
[ ${#colls[@]} -gt 0 ] || colls=(allreduce allgather reducescatter broadcast reduce alltoall sendrecv)
sanitizer=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
limit=${SANITIZE_TIMEOUT:-120}
logs=${LOG_DIR:-$(mktemp -d)}
port=$(( 20000 + RANDOM % 20000 ))
status=0
for c in "${colls[@]}"; do
  pids=()
  for (( r = 0; r < n; ++r )); do
    PLUGBOARD_RANK=$r PLUGBOARD_NRANKS=$n PLUGBOARD_LOCAL_RANK=$r PLUGBOARD_BOOTSTRAP_ADDR=127.0.0.1:$port \
    PLUGBOARD_TIMEOUT=300 PLUGBOARD_GPU_WAIT_TIMEOUT=300 NCCL_NVLS_ENABLE=0 PLUGBOARD_NVLS_ENABLE=0 \
      timeout "$limit" "$sanitizer" --tool "$tool" --error-exitcode 9 \
      "$build/bin/plugboard-perf" --mem gpu -C "$c" -b 1K -e 256K -f 16 -n 2 -w 1 -c 1 > "$logs/$tool-$c-$r.log" 2>&1 &
    pids+=($!)
  done
  line="$tool $c:"
  for (( r = 0; r < n; ++r )); do
    wait "${pids[$r]}"
    rc=$?
    summary=$(grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$logs/$tool-$c-$r.log" | tail -1 | sed 's/^=* *//')
    wrong=$(grep -E '^ +[0-9]' "$logs/$tool-$c-$r.log" | awk '($9 != "0" && $9 != "N/A") || ($13 != "0" && $13 != "N/A") {w++} END {print w + 0}')
    line+=" rank $r rc=$rc [${summary:-no summary}] rows with #wrong != 0: $wrong;"
    [ "$rc" = 0 ] || status=1
  done
  echo "$line"
  port=$(( port + 1 ))
done
exit $status
