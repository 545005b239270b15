#!/usr/bin/env bash
# Issue 13: the ethernet plugin's stripe sockets (ethernet.stripe_sockets),
# measured on this machine's cores over TCP loopback, peers in the same job.
#  - host buffers, for each rank count in NRANKS_LIST (2 4 8):
#    bench/run-host-bench.sh with the default (auto) setting beside Open MPI
#    and Gloo, then plugboard-perf alone with each count in STRIPES_LIST
#    (0 2 4 8), allreduce and allgather, MIN_BYTES..MAX_BYTES (256K..256M);
#  - GPU buffers, where there are at least 2 GPUs: allreduce over ethernet
#    with stripes 0 and 4 beside NCCL's socket transport (default sockets,
#    and 4 threads x 2 sockets), same processes. GPU_RUNS replaces that
#    list: "name|stripes|extra environment" entries separated by %.
# PEERS=0 skips the run-host-bench.sh runs.
#   bash bench/ethernet-stripes.sh <build-dir> <out-dir>
# Every run's output goes under <out-dir>; a line per run says its result.
set -u
cd "$(dirname "$0")/.."
build=${1:?usage: ethernet-stripes.sh <build-dir> <out-dir>}
out=${2:?usage: ethernet-stripes.sh <build-dir> <out-dir>}
mkdir -p "$out"
perf="$build/bin/plugboard-perf"
min=${MIN_BYTES:-256K}
max=${MAX_BYTES:-256M}
export NCCL_NVLS_ENABLE=0 PLUGBOARD_NVLS_ENABLE=0

note() { echo "$1 rc=$2 ($(( SECONDS - t0 )) s)"; }
for n in ${NRANKS_LIST:-2 4 8}; do
  t0=$SECONDS
  [ "${PEERS:-1}" = 1 ] && SKIP_DEPS=1 NO_BUILD=1 PLUGBOARD_BUILD_DIR="$build" PLUGBOARD_COMMIT="${RUN_COMMIT:-}" NRANKS=$n \
    MIN_BYTES=$min MAX_BYTES=$max ITERS=10 WARMUP=2 OUT_DIR="$out/peers-$n" \
    bash bench/run-host-bench.sh > "$out/peers-$n.log" 2>&1
  [ "${PEERS:-1}" = 1 ] && note "peers n=$n" $?
  for s in ${STRIPES_LIST:-0 2 4 8}; do
    for c in allreduce allgather; do
      t0=$SECONDS
      PLUGBOARD_TRANSPORTS=ethernet PLUGBOARD_ETHERNET_STRIPE_SOCKETS=$s timeout 300 "$perf" --mem host \
        --nranks "$n" -C "$c" -b "$min" -e "$max" -f 4 -n 10 -w 2 -c 1 --csv "$out/host-$c-n$n-s$s.csv" \
        > "$out/host-$c-n$n-s$s.log" 2>&1
      note "host $c n=$n stripes=$s" $?
    done
  done
done
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$ngpu" -ge 2 ]; then
  gpu_runs=("s0|0|" "s4|4|" "s4-nccl4x2|4|NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=2")
  [ -n "${GPU_RUNS:-}" ] && IFS=% read -r -a gpu_runs <<< "$GPU_RUNS"
  for v in "${gpu_runs[@]}"; do
    IFS='|' read -r name s ncclenv <<< "$v"
    t0=$SECONDS
    env $ncclenv PLUGBOARD_TRANSPORTS=ethernet PLUGBOARD_ETHERNET_STRIPE_SOCKETS=$s NCCL_P2P_DISABLE=1 \
      NCCL_SHM_DISABLE=1 NCCL_NET=Socket timeout 400 "$perf" --mem gpu --nranks 2 --compare nccl -C allreduce \
      -b 64K -e 1G -f 4 -n 5 -w 2 --csv "$out/gpu-net-$name.csv" > "$out/gpu-net-$name.log" 2>&1
    note "gpu ethernet $name" $?
  done
fi
