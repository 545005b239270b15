#!/usr/bin/env bash
# Issue 13, target 3: GPU buffers over a network transport beside host
# buffers over the same transport and Open MPI (ob1, btl tcp on loopback),
# in one run on one machine, NRANKS ranks (2). On a one-GPU machine the ranks share
# the GPU: call it under CUDA MPS (tests/gpu/mps.sh: with_mps), or the
# ranks' kernels time-slice. NCCL cannot be the peer here: it refuses two
# ranks on one GPU ("Duplicate GPU detected").
#   bash bench/gpu/staged-vs-host.sh BUILD_DIR OUT_DIR
# Environment: NRANKS (2), COLLECTIVE (allreduce; any plugboard-perf -C name, Open MPI
# beside it for allreduce and allgather only), TRANSPORT (ethernet), MIN (8), MAX (256M), FACTOR (8),
# ITERS (20), WARMUP (5), PORT_BLOCKS (list of gpu_port_blocks values to
# sweep; default: the setting's default only), RELAY (list of
# gpu_host_relay_bytes values to sweep, 0 = no host relay; default: the
# setting's default only), FAILOVER (list of `failover` values, 0 and/or
# 1: with 1 every GPU call goes through the host relay).
# Prints one table: time per size for each run, and gpu / host.
set -uo pipefail
build=${1:?usage: staged-vs-host.sh BUILD_DIR OUT_DIR}
out=${2:?usage: staged-vs-host.sh BUILD_DIR OUT_DIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
perf="$build/bin/plugboard-perf"
sizes=(-b "${MIN:-8}" -e "${MAX:-256M}" -f "${FACTOR:-8}" -n "${ITERS:-20}" -w "${WARMUP:-5}")
export PLUGBOARD_TRANSPORTS=${TRANSPORT:-ethernet} NCCL_NVLS_ENABLE=0 PLUGBOARD_NVLS_ENABLE=0
coll=${COLLECTIVE:-allreduce}
n=${NRANKS:-2}
failed=0

# run NAME COMMAND...: bounded in time; its output in OUT/NAME.txt.
run() {
  local name=$1; shift
  timeout 300 "$@" > "$out/$name.txt" 2>&1 || { echo "staged-vs-host: $name failed (rc $?)"; tail -5 "$out/$name.txt"; failed=1; }
}

run host "$perf" --mem host --nranks "$n" -C "$coll" "${sizes[@]}" --csv "$out/host.csv"
runs=(host)
# sweep VARIABLE TAG VALUE...: one GPU run per value of a setting, named gpu-TAG<value>.
sweep() {
  local var=$1 tag=$2 v; shift 2
  for v in "$@"; do
    run "gpu-$tag$v" env "$var=$v" "$perf" --mem gpu --nranks "$n" -C "$coll" "${sizes[@]}" --csv "$out/gpu-$tag$v.csv"
    runs+=("gpu-$tag$v")
  done
}
# shellcheck disable=SC2086
if [ -n "${PORT_BLOCKS:-}" ]; then
  sweep PLUGBOARD_GPU_PORT_BLOCKS b $PORT_BLOCKS
elif [ -n "${RELAY:-}" ]; then
  sweep PLUGBOARD_GPU_HOST_RELAY_BYTES r $RELAY
elif [ -n "${FAILOVER:-}" ]; then
  sweep PLUGBOARD_FAILOVER f $FAILOVER
else
  run gpu "$perf" --mem gpu --nranks "$n" -C "$coll" "${sizes[@]}" --csv "$out/gpu.csv"
  runs+=(gpu)
fi
if [ "$coll" != allreduce ] && [ "$coll" != allgather ]; then
  echo "staged-vs-host: mpi_bench has no $coll: no Open MPI column"
elif command -v mpicc > /dev/null && command -v mpirun > /dev/null; then
  mpicc -O2 -std=c11 -o "$out/mpi_bench" "$here/mpi_bench.c" &&
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 run openmpi mpirun --allow-run-as-root --oversubscribe \
      --bind-to none -np "$n" --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo "$out/mpi_bench" \
      -C "$coll" "${sizes[@]}" --csv "$out/openmpi.csv"
  [ -f "$out/openmpi.csv" ] && runs+=(openmpi)
else
  echo "staged-vs-host: no mpicc/mpirun here: no Open MPI column"
fi

python3 - "$out" "$coll" "${runs[@]}" <<'EOF'
import csv, sys, os
out, coll, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
times = {}
for r in runs:
    path = os.path.join(out, r + ".csv")
    if not os.path.exists(path):
        continue
    for row in csv.DictReader(open(path)):
        if r == "openmpi":
            if row.get("collective") != coll:
                continue
            t = float(row["time_us"])
        else:
            t = float(row["oop_time_us"])
        times.setdefault(int(row["size_bytes"]), {})[r] = t
cols = [r for r in runs if any(r in v for v in times.values())]
gpu_cols = [c for c in cols if c.startswith("gpu")]
head = ["size"] + [c + " us" for c in cols] + [c + "/host" for c in gpu_cols]
print("| " + " | ".join(head) + " |")
print("|" + "---:|" * len(head))
for size in sorted(times):
    t = times[size]
    cells = [str(size)] + ["%.1f" % t[c] if c in t else "-" for c in cols]
    cells += ["%.2fx" % (t[c] / t["host"]) if c in t and "host" in t else "-" for c in gpu_cols]
    print("| " + " | ".join(cells) + " |")
EOF
exit $failed
