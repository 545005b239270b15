#!/usr/bin/env bash
# One command for the lent GPU machine: configure and build (CMake + ninja,
# sm_90), run the GPU tests, the host test suites and the GPU
# microbenchmarks; write every log under $OUT; print a summary table last.
#   OUT=/some/dir bash tests/gpu/run.sh
# $OUT gets summary.tsv and logs.tgz (every log and CSV: the device tool
# returns only a few files). RUN_ONLY=<extended regex> runs only the steps
# whose names match (configure and build always run). RUN_COMMIT=<commit>
# names the commit in machine.txt: pass it, since a tree copied to the
# device may carry a .git that lags its files. A warm machine's build dir
# may also miss edits whose times predate its outputs; `rm -rf build-gpu`
# (or a cold machine) when in doubt.
# (carry .gpu-deps from `bash tests/gpu/net-deps.sh prepare` to build the
# ucx and libfabric plugins there too)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(mktemp -d)}
LOGS="$OUT/logs"
mkdir -p "$LOGS"
build=${PLUGBOARD_GPU_BUILD_DIR:-build-gpu}
jobs=$(nproc)
# Safety on shared machines: never create NVLink multicast objects.
export NCCL_NVLS_ENABLE=0 PLUGBOARD_NVLS_ENABLE=0
# The NCCL API library's fallback test finds the machine's real NCCL (PyTorch's wheel) by the default search.
export PB_TEST_REAL_NCCL=${PB_TEST_REAL_NCCL:-auto}

summary="$OUT/summary.tsv"
printf "step\tresult\tseconds\tdetail\n" > "$summary"

# selected NAME: false when RUN_ONLY leaves the step out (configure and build always run).
selected() {
  case "$1" in configure|build) return 0 ;; esac
  [[ -z "${RUN_ONLY:-}" || "$1" =~ $RUN_ONLY ]]
}

# step NAME COMMAND...: runs it with its log in $LOGS/NAME.log, records the result.
step() {
  local name=$1; shift
  selected "$name" || return 0
  local start=$(date +%s) result=PASS rc=0
  "$@" > "$LOGS/$name.log" 2>&1 || rc=$?
  # 77: the step's own "cannot run here" (its log's SKIP line says why).
  if [ "$rc" -eq 77 ]; then result=SKIP; elif [ "$rc" -ne 0 ]; then result=FAIL; fi
  local detail=$(grep -E "^SKIP|tests passed|PASSED|FAILED|_median|_us |Out of bounds|x_nccl geometric| FAIL$" "$LOGS/$name.log" | tail -3 | tr '\n' ' ' | tr '\t' ' ')
  printf "%s\t%s\t%s\t%s\n" "$name" "$result" "$(( $(date +%s) - start ))" "$detail" >> "$summary"
}

# skip_step NAME REASON: a SKIP row in the summary and REASON as the step's log
# (printed with the other logs at the end), for a step this machine cannot run.
skip_step() {
  selected "$1" || return 0
  echo "SKIP: $2" > "$LOGS/$1.log"
  printf "%s\tSKIP\t0\t%s\n" "$1" "$2" >> "$summary"
}

# Why the ib-verbs transport cannot run here ("" when it can): the plugin
# is not built (no libibverbs-dev) or the machine has no RDMA device (none
# of the GPU machines has; tests/rdma/soft_roce.sh removes the one it makes).
ib_verbs_unusable() {
  [ -e "$build/lib/plugboard/libplugboard-ib-verbs.so" ] || { echo "libplugboard-ib-verbs.so is not built"; return; }
  compgen -G "/sys/class/infiniband/*" > /dev/null || echo "no RDMA device (/sys/class/infiniband is empty or absent)"
}

{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvcc --version | tail -1; \
  echo "commit ${RUN_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"; } > "$LOGS/machine.txt" 2>&1

# UCX/libfabric headers carried in .gpu-deps (tests/gpu/net-deps.sh), if any.
netargs=$(bash tests/gpu/net-deps.sh cmake-args)
[ -d .gpu-deps/pc ] && export PKG_CONFIG_PATH="$PWD/.gpu-deps/pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# The Python package against this machine's python3 and its pybind11, if any.
pyargs="-DPython_EXECUTABLE=$(command -v python3)"
pybind=$(python3 -c 'import pybind11; print(pybind11.get_cmake_dir())' 2>/dev/null) && pyargs+=" -Dpybind11_DIR=$pybind"
# shellcheck disable=SC2086
step configure cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLUGBOARD_ENABLE_CUDA=ON \
  -DPLUGBOARD_CUDA_ARCHITECTURES=90 $netargs $pyargs
# BUILD_TARGETS="a b": build only those targets (a short diagnostic run).
# shellcheck disable=SC2086
step build cmake --build "$build" -j "$jobs" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
# shellcheck source=tests/gpu/mps.sh
source tests/gpu/mps.sh
# The GPU tests and the correctness sweep with CUDA MPS (several ranks'
# kernels at once on one GPU) and without (time-sliced).
step gpu-tests-mps with_mps ctest --test-dir "$build" -L gpu --output-on-failure --timeout 300
# The execution-plan executor's GPU suite alone (also part of gpu-tests-mps).
step plan-tests-mps with_mps ctest --test-dir "$build" -R "GpuPlan" --output-on-failure --timeout 120
# Plans (LL two-shot, ring, one-shot) beside the built-in allreduce, 2 ranks (sharing the GPU under MPS on one GPU).
step plans-bench-mps with_mps bash bench/gpu/plans-vs-builtin.sh "$build" "$LOGS/plans-bench"
# Allgather plans (the get plan beside puts and the ring) beside the built-in allgather.
step plans-bench-allgather-mps with_mps env COLLECTIVE=allgather PLANS="allgather_allpairs allgather_allpairs_get allgather_ring" \
  bash bench/gpu/plans-vs-builtin.sh "$build" "$LOGS/plans-bench-allgather"
# The same with every rank on GPU 0 (ranks share its SMs: the slice count and residency checks).
step plan-tests-shared-mps env CUDA_VISIBLE_DEVICES=0 bash -c "source tests/gpu/mps.sh && with_mps ctest --test-dir $build \
  -R GpuPlan --output-on-failure --timeout 120"
# GPU collectives from Python (plugboard.GpuCollectives on CUDA tensors), 2
# ranks on GPU 0. torch shares the process: the module is built with the
# system g++ (a toolchain that links libstdc++ statically gives the process
# two of them: "free(): invalid pointer" at the first call).
python_gpu_sysgcc() {
  [ -x /usr/bin/g++ ] || { echo "no /usr/bin/g++"; return 1; }
  # shellcheck disable=SC2086
  CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++ cmake -S . -B build-sysgcc -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPLUGBOARD_ENABLE_CUDA=ON -DPLUGBOARD_CUDA_ARCHITECTURES=90 $pyargs && \
  cmake --build build-sysgcc -j "$jobs" --target _plugboard plugboard-cudaipc plugboard-ethernet && \
  with_mps env PYTHONPATH="$PWD/build-sysgcc/python" python3 -m pytest -q -p no:cacheprovider -rs python/tests/test_gpu.py
}
step python-gpu-mps python_gpu_sysgcc
# The NCCL API library's GPU suite alone (also part of gpu-tests-mps).
step nccl-tests-mps with_mps ctest --test-dir "$build" -R "NcclApi" --output-on-failure --timeout 200
# SwitchChannel (issue 17): the peers backend's tests, then its allreduce and
# allgather beside the built-in algorithms on one GPU, 2 ranks under MPS
# (NCCL cannot put two ranks on one GPU; the several-GPU runs below add it).
step switch-tests-mps with_mps ctest --test-dir "$build" -R "GpuSwitch" --output-on-failure --timeout 200
for c in allreduce allgather; do
  for sw in off peers; do
    step "switch-1gpu-$c-$sw" env CUDA_VISIBLE_DEVICES=0 PLUGBOARD_GPU_SWITCH=$sw bash -c "source tests/gpu/mps.sh && \
      with_mps $build/bin/plugboard-perf --mem gpu --nranks 2 -C $c -b 64K -e 256M -f 4 -n 20 -w 5 \
      --csv $LOGS/switch-1gpu-$c-$sw.csv"
  done
done
# The NCCL API library's fallback to a real NCCL needs a build that shares
# libstdc++ (a toolchain linking it statically makes the fallback refuse, by
# name): where $CXX is another compiler, build the NCCL suite with the
# system g++ too and run the fallback test there.
nccl_fallback_sysgcc() {
  [ -x /usr/bin/g++ ] || { echo "no /usr/bin/g++"; return 0; }
  CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++ cmake -S . -B build-sysgcc -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPLUGBOARD_ENABLE_CUDA=ON -DPLUGBOARD_CUDA_ARCHITECTURES=90 && \
  cmake --build build-sysgcc -j "$jobs" --target plugboard-nccl plugboard_nccl_gpu_tests plugboard-cudaipc \
    plugboard-ethernet && build-sysgcc/bin/plugboard_nccl_gpu_tests --gtest_filter='*Fallback*'
}
step nccl-fallback-sysgcc nccl_fallback_sysgcc
step check-sweep-mps with_mps bash tests/gpu/check-sweep.sh "$build" 2
step staged-mps with_mps bash tests/gpu/staged-mps.sh "$build"
# The same cases with `failover` on: every call goes through the host relay,
# the large ones in pieces (docs/design.md "Failover of GPU calls").
step staged-failover-mps with_mps env PLUGBOARD_FAILOVER=1 bash tests/gpu/staged-mps.sh "$build"
# Issue 13 target 3: GPU vs host buffers over ethernet and Open MPI, one run
# (PORT_BLOCKS="1 4": sweep gpu_port_blocks).
step staged-bench-mps with_mps bash bench/gpu/staged-vs-host.sh "$build" "$LOGS/staged-bench"
step staged-tests-mps with_mps ctest --test-dir "$build" -R "GpuCollectivesPort|GpuStaging" --output-on-failure --timeout 120
# On several GPUs (one rank per GPU, no MPS) the whole suite runs past one
# device call's 600 s: GPU_TESTS_REGEX=<ctest -R regex> runs a part of it.
step gpu-tests ctest --test-dir "$build" -L gpu ${GPU_TESTS_REGEX:+-R "$GPU_TESTS_REGEX"} --output-on-failure --timeout 300
step check-repro env SWEEP=repro bash tests/gpu/check-sweep.sh "$build" 2
step host-tests ctest --test-dir "$build" -LE gpu -j 8 --output-on-failure --timeout 300
step fifo-latency "$build/bin/plugboard-bench-fifo-latency" 20000
# One-way latency over ethernet: GPU through the proxy vs host semaphores (MPS: both ranks on one GPU).
step net-latency-mps with_mps "$build/bin/plugboard-bench-net-latency" 2000
step launch-floor "$build/bin/plugboard-bench-launch" 2000
# Host buffers over ethernet on this machine's cores beside Open MPI (issue 13's target 2).
for n in 2 4 8; do
  step "host-bench-$n" env SKIP_DEPS=1 NO_BUILD=1 PLUGBOARD_BUILD_DIR="$build" PLUGBOARD_COMMIT="${RUN_COMMIT:-}" \
    NRANKS=$n MAX_BYTES=16M ITERS=50 WARMUP=5 OUT_DIR="$LOGS/host-bench-$n" bash bench/run-host-bench.sh
done
# The network plugins side by side (issue 13 target 4): where .gpu-deps
# built libfabric and ucx, their tests, the GPU-buffer cases over each, and
# host allreduce times beside ethernet's.
for t in libfabric ucx ib-verbs; do
  if [ "$t" = ib-verbs ] && why=$(ib_verbs_unusable) && [ -n "$why" ]; then
    skip_step "staged-mps-$t" "$why"
    continue
  fi
  [ -e "$build/lib/plugboard/libplugboard-$t.so" ] && \
    step "staged-mps-$t" with_mps env PLUGBOARD_TRANSPORTS=$t bash tests/gpu/staged-mps.sh "$build"
done
# Issue 15: GPU buffers over the faulty transport (delays: correct results;
# failures, an exit, lost signals: named errors, no hang).
step faulty-mps with_mps bash tests/gpu/faulty-mps.sh "$build"
# Issue 15: compute-sanitizer over the GPU tests' own forked ranks (no MPS).
step sanitize-tests bash tests/gpu/sanitize-tests.sh "$build"
# Issue 16: the ib-verbs transport over Soft-RoCE where the machine's kernel allows it (else skipped, 77).
step soft-roce bash tests/rdma/soft_roce.sh "$build"
step net-plugin-tests ctest --test-dir "$build" -R "ucx|Ucx|libfabric|Libfabric" -j 8 --output-on-failure --timeout 300
for n in 2 4; do
  step "transports-host-$n" env PLUGBOARD_COMMIT="${RUN_COMMIT:-}" LOG_DIR="$LOGS/transports-host-$n" \
    bash bench/transports-host.sh "$build" "$n" 16M 100
done
perf="$build/bin/plugboard-perf"
ngpu=$(nvidia-smi -L | wc -l)
# Ranks of the several-GPU runs: one per GPU (at most 8) unless PERF_NRANKS says.
nr=${PERF_NRANKS:-$(( ngpu < 8 ? ngpu : 8 ))}
if [ "$ngpu" -ge 2 ]; then
  # Several GPUs (one rank per GPU; docs/perf/*-2xh100.md): every
  # collective beside NCCL in the same run, 8 B - 1 GiB, results checked.
  step channels "$build/bin/plugboard-bench-channels"
  cmp=(--mem gpu --nranks "$nr" --compare nccl)
  for c in allreduce allgather reducescatter broadcast reduce alltoall sendrecv; do
    step "perf-$c" "$perf" "${cmp[@]}" -C "$c" -b 8 -e 1G -f 2 -n 20 -w 5 --csv "$LOGS/$c.csv"
    step "perf-$c-graph" "$perf" "${cmp[@]}" -C "$c" -b 8 -e 64M -f 2 -n 20 -w 5 -G 5 --csv "$LOGS/$c-graph.csv"
  done
  # Execution plans through GpuPlanExecutor beside the built-in collective
  # and NCCL in the same job (docs/execution-plans.md, issue 18).
  for c in allgather allreduce alltoall; do
    step "perf-plans-builtin-$c" "$perf" "${cmp[@]}" -C "$c" -b 1K -e 256M -f 4 -n 20 -w 5 --csv "$LOGS/plans-builtin-$c.csv"
  done
  for p in allgather_allpairs:allgather allgather_allpairs_get:allgather allgather_ring:allgather allreduce_allpairs:allreduce allreduce_allpairs_blocks:allreduce allreduce_allpairs_packets:allreduce allreduce_allpairs_twoshot:allreduce allreduce_packets:allreduce allreduce_switch:allreduce \
           allreduce_ring:allreduce alltoall_allpairs:alltoall; do
    step "perf-plan-${p%%:*}" "$perf" "${cmp[@]}" --plan "plans/${p%%:*}/${nr}ranks.json" -C "${p#*:}" -b 1K -e 256M -f 4 \
      -n 20 -w 5 --csv "$LOGS/plan-${p%%:*}.csv"
  done
  # NCCL at its best: its symmetric-memory kernels (2.27+), with and without graphs.
  for c in allreduce allgather reducescatter; do
    step "perf-$c-sym" "$perf" "${cmp[@]}" --nccl-symmetric -C "$c" -b 8 -e 64M -f 2 -n 20 -w 5 --csv "$LOGS/$c-sym.csv"
    step "perf-$c-graph-sym" "$perf" "${cmp[@]}" --nccl-symmetric -C "$c" -b 8 -e 64M -f 2 -n 20 -w 5 -G 5 \
      --csv "$LOGS/$c-graph-sym.csv"
  done
  # Send/recv on the pipeline only (gpu_p2p_small_bytes=0) beside the LL default above, same machine.
  step perf-sendrecv-pipe env PLUGBOARD_GPU_P2P_SMALL_BYTES=0 "$perf" "${cmp[@]}" -C sendrecv -b 8 -e 16M -f 2 -n 20 -w 5 \
    --csv "$LOGS/sendrecv-pipe.csv"
  step perf-sendrecv-graph-pipe env PLUGBOARD_GPU_P2P_SMALL_BYTES=0 "$perf" "${cmp[@]}" -C sendrecv -b 8 -e 16M -f 2 -n 20 \
    -w 5 -G 5 --csv "$LOGS/sendrecv-graph-pipe.csv"
  # SwitchChannel algorithms over the peers backend beside the built-in ones (same sizes) and NCCL.
  for c in allreduce allgather; do
    for sw in off peers; do
      step "perf-$c-switch-$sw" env PLUGBOARD_GPU_SWITCH=$sw "$perf" "${cmp[@]}" -C "$c" -b 64K -e 1G -f 4 -n 20 -w 5 \
        --csv "$LOGS/$c-switch-$sw.csv"
    done
  done
  for t in half bfloat16; do
    step "perf-allreduce-$t" "$perf" "${cmp[@]}" -C allreduce -d "$t" -b 8 -e 256M -f 8 -n 5 --csv "$LOGS/allreduce-$t.csv"
  done
  # The network path between GPUs beside NCCL's network transport, same
  # run: its socket transport, and its IB transport beside ib-verbs.
  for t in ethernet libfabric ucx ib-verbs; do
    if [ "$t" = ib-verbs ] && why=$(ib_verbs_unusable) && [ -n "$why" ]; then
      skip_step "perf-net-$t" "$why"
      continue
    fi
    ncclnet=Socket
    [ "$t" = ib-verbs ] && ncclnet=IB
    [ -e "$build/lib/plugboard/libplugboard-$t.so" ] && \
      step "perf-net-$t" env PLUGBOARD_TRANSPORTS=$t NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=$ncclnet \
        "$perf" "${cmp[@]}" -C allreduce -b 8 -e 1G -f 8 -n 5 -w 2 --csv "$LOGS/net-$t.csv"
  done
  # Every collective at odd sizes, types and ops over the mappings, checked:
  # one rank per GPU, then two per GPU under MPS.
  step odd-cudaipc env NRANKS="$nr" PLUGBOARD_TRANSPORTS=cudaipc bash tests/gpu/staged-mps.sh "$build"
  step odd-cudaipc-2x-mps with_mps env NRANKS=$(( 2 * nr < 8 ? 2 * nr : 8 )) PLUGBOARD_TRANSPORTS=cudaipc \
    bash tests/gpu/staged-mps.sh "$build"
  # Mixed pairs: 4 ranks (2 per GPU, under MPS), half the pairs over
  # cudaipc and half forced onto ethernet by rules; every collective checked.
  step mixed-pairs-mps with_mps env NRANKS=4 PLUGBOARD_TRANSPORTS=cudaipc,ethernet \
    PLUGBOARD_CONFIG="$PWD/tests/gpu/mixed-pairs.yaml" bash tests/gpu/staged-mps.sh "$build"
fi
# The NCCL API library (issue 19): its cost over calling GpuCollectives
# directly (plugboard-perf's NCCL column is the library itself), and
# PyTorch's ProcessGroupNCCL on it (LD_PRELOAD by SONAME), with the NCCL
# symbols this torch needs listed first.
if [ -e "$build/lib/libplugboard-nccl.so" ]; then
  shim=(--mem gpu --nranks "$(( nr > 2 ? nr : 2 ))" --compare nccl --nccl-lib "$PWD/$build/lib/libplugboard-nccl.so")
  step perf-nccl-shim "$perf" "${shim[@]}" -C allreduce -b 8 -e 64M -f 4 -n 50 -w 10 --csv "$LOGS/nccl-shim.csv"
  step perf-nccl-shim-graph "$perf" "${shim[@]}" -C allreduce -b 8 -e 64M -f 4 -n 50 -w 10 -G 5 \
    --csv "$LOGS/nccl-shim-graph.csv"
  step perf-nccl-shim-sendrecv "$perf" "${shim[@]}" -C sendrecv -b 8 -e 64M -f 4 -n 50 -w 10 --csv "$LOGS/nccl-shim-sendrecv.csv"
  step torch-nccl-symbols bash -c "nm -D --undefined-only \$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')/lib/libtorch_cuda.so | grep -i ' nccl' | sort"
  if [ "$ngpu" -ge 2 ]; then
    step torch-nccl-shim env LD_PRELOAD="$PWD/$build/lib/plugboard-nccl/libnccl.so.2" python3 tests/nccl/torch_nccl_shim.py "$nr"
    # dist.all_reduce beside the real NCCL, same run (bench/torch_nccl_sweep.py).
    step torch-nccl-sweep python3 bench/torch_nccl_sweep.py --shim "$build/lib/plugboard-nccl/libnccl.so.2" \
      --nranks "$nr" --max-bytes 256M --csv "$LOGS/torch-nccl-sweep.csv"
  else
    step torch-nccl-shim-mps with_mps env LD_PRELOAD="$PWD/$build/lib/plugboard-nccl/libnccl.so.2" python3 tests/nccl/torch_nccl_shim.py 2
  fi
  step torch-nccl-real python3 tests/nccl/torch_nccl_shim.py "$(( nr > 2 ? nr : 2 ))"
fi
# GPU buffers over the ethernet plugin (staged through pinned host memory).
step perf-staged-ethernet env PLUGBOARD_TRANSPORTS=ethernet "$perf" --mem gpu --nranks 2 -C allreduce -b 1K -e 64M -f 8 -n 10 \
  --csv "$LOGS/staged-ethernet.csv"

echo
echo "== machine"; cat "$LOGS/machine.txt"
echo "== microbenchmarks"; grep -h -E "_us|GBps|_over_" "$LOGS/fifo-latency.log" "$LOGS/channels.log" \
  "$LOGS/net-latency-mps.log" 2>/dev/null
echo "== kernel launch floor (empty kernel, us per launch)"; cat "$LOGS/launch-floor.log" 2>/dev/null
[ -f "$LOGS/staged-mps.log" ] && { echo "== staged-mps"; cat "$LOGS/staged-mps.log"; }
[ -f "$LOGS/staged-bench-mps.log" ] && { echo "== staged-bench-mps (GPU vs host over ethernet, 2 ranks, MPS)"; cat "$LOGS/staged-bench-mps.log"; }
for n in 2 4 8; do
  [ -f "$LOGS/host-bench-$n/table.txt" ] && { echo "== host-bench-$n (host buffers, ethernet vs Open MPI)"; \
    grep -v "^#  *vs gloo" "$LOGS/host-bench-$n/table.txt"; }
done
for t in libfabric ucx ib-verbs; do
  [ -f "$LOGS/staged-mps-$t.log" ] && { echo "== staged-mps-$t"; cat "$LOGS/staged-mps-$t.log"; }
done
for f in odd-cudaipc odd-cudaipc-2x-mps mixed-pairs-mps; do
  [ -f "$LOGS/$f.log" ] && { echo "== $f"; grep -v "^ " "$LOGS/$f.log"; }
done
[ -f "$LOGS/faulty-mps.log" ] && { echo "== faulty-mps"; cat "$LOGS/faulty-mps.log"; }
for n in 2 4; do
  [ -f "$LOGS/transports-host-$n.log" ] && { echo "== transports-host-$n"; sed -n '/^## /,$p' "$LOGS/transports-host-$n.log"; }
done
for f in check-sweep-mps check-repro; do
  [ -f "$LOGS/$f.log" ] && { echo "== $f: $(sed -n '/^== correctness sweep/,$p' "$LOGS/$f.log" | grep -c " ok$") runs ok"; \
    sed -n '/^== correctness sweep/,$p' "$LOGS/$f.log" | grep -v " ok$" | head -40; }
done
for t in gpu-tests-mps staged-tests-mps gpu-tests host-tests; do
  [ -f "$LOGS/$t.log" ] && grep -q "tests FAILED" "$LOGS/$t.log" && { echo "== $t failed"; sed -n '/tests FAILED/,$p' "$LOGS/$t.log" | head -40; }
done
for f in torch-nccl-symbols torch-nccl-shim torch-nccl-shim-mps torch-nccl-real torch-nccl-sweep; do
  [ -f "$LOGS/$f.log" ] && { echo "== $f"; tail -40 "$LOGS/$f.log"; }
done
for f in "$LOGS"/perf-*.log; do [ -f "$f" ] && { echo "== $(basename "$f" .log)"; grep -v "^#  *Rank\|^$" "$f" | tail -25; }; done
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$LOGS"
echo "== summary (logs in $OUT/logs.tgz)"
column -t -s $'\t' "$summary" 2>/dev/null || cat "$summary"
! grep -q $'\tFAIL\t' "$summary"
