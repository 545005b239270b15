#!/usr/bin/env bash
# Compares Plugboard's host collectives (ethernet plugin, TCP loopback) with
# Gloo (tcp transport on 127.0.0.1) and Open MPI (ob1 + btl tcp on lo, no
# shared memory) on this machine, in one run: allreduce (float sum) and
# allgather, nranks local ranks, sizes MIN..MAX times 2.
#
#   bench/run-host-bench.sh [--nranks N] [--min SIZE] [--max SIZE] [--iters N]
#                           [--warmup N] [--out DIR] [--skip-deps] [--no-build]
#
# Each flag has an environment twin: NRANKS (4), MIN_BYTES (8), MAX_BYTES (64M),
# ITERS (20), WARMUP (5), OUT_DIR (bench/results/<timestamp>), SKIP_DEPS=1,
# NO_BUILD=1. Also: PLUGBOARD_BUILD_DIR (build), PLUGBOARD_COMMIT (the commit
# to record), PLUGBOARD_PERF (use this
# plugboard-perf binary, no build), GLOO_ALGORITHM (ring, gloo's default, or
# bcube: allreduce only), MPIRUN_EXTRA (extra mpirun arguments).
#
# Writes to the output directory: plugboard_{allreduce,allgather}.{csv,txt},
# gloo.{csv,txt}, openmpi.{csv,txt}, meta.txt, combined.csv, table.txt, and the
# two driver binaries under bin/. Exits non-zero if any benchmark failed or
# reported wrong values (the table is still printed from what did run).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

nranks=${NRANKS:-4}
min_bytes=${MIN_BYTES:-8}
max_bytes=${MAX_BYTES:-64M}
iters=${ITERS:-20}
warmup=${WARMUP:-5}
out=${OUT_DIR:-}
skip_deps=${SKIP_DEPS:-0}
no_build=${NO_BUILD:-0}

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --nranks) nranks=$2; shift 2 ;;
    --min) min_bytes=$2; shift 2 ;;
    --max) max_bytes=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --skip-deps) skip_deps=1; shift ;;
    --no-build) no_build=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "run-host-bench: unknown argument '$1'" >&2; usage 2 ;;
  esac
done
[ -n "$out" ] || out="$root/bench/results/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out/bin"
out=$(cd "$out" && pwd)
sizes=(-b "$min_bytes" -e "$max_bytes" -f 2 -n "$iters" -w "$warmup")

step() { echo; echo "=== $*"; }

# ---- dependencies and builds -------------------------------------------------
if [ "$skip_deps" != 1 ]; then
  step "dependencies"
  bash "$here/install-deps.sh"
fi

if [ -n "${PLUGBOARD_PERF:-}" ]; then
  perf=$PLUGBOARD_PERF
else
  build=${PLUGBOARD_BUILD_DIR:-build}
  case "$build" in /*) ;; *) build="$root/$build" ;; esac
  perf="$build/bin/plugboard-perf"
  if [ "$no_build" != 1 ] || [ ! -x "$perf" ]; then
    step "building Plugboard in $build (tools/build.sh; incremental)"
    # A fresh build dir needs no GPU parts for host collectives; an existing
    # one keeps its own configuration.
    extra=()
    [ -f "$build/CMakeCache.txt" ] || extra=(-DPLUGBOARD_ENABLE_CUDA=OFF)
    [ -f "$root/tools/install-deps.sh" ] && [ "$skip_deps" != 1 ] && bash "$root/tools/install-deps.sh"
    PLUGBOARD_BUILD_DIR="$build" bash "$root/tools/build.sh" "${extra[@]}"
  fi
fi
[ -x "$perf" ] || { echo "run-host-bench: no plugboard-perf at $perf" >&2; exit 1; }

step "compiling the Gloo and MPI drivers into $out/bin"
# Gloo is a Debian package here (install-deps.sh); where it cannot be
# installed (the lent GPU machines) the table says so instead.
gloo_skip=""
if [ -f /usr/include/gloo/allreduce_ring.h ] || [ -f /usr/local/include/gloo/allreduce_ring.h ]; then
  g++ -O2 -std=c++17 -o "$out/bin/gloo_bench" "$here/gloo_bench.cpp" -lgloo -lpthread
else
  gloo_skip="Gloo headers not installed on this machine (libgloo-dev)"
  echo "$gloo_skip" > "$out/gloo.skipped"
fi
mpicc -O2 -std=c11 -o "$out/bin/mpi_bench" "$here/mpi_bench.c"

# ---- provenance ----------------------------------------------------------------
{
  echo "date=$(date -Is)"
  echo "host=$(uname -srm), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
  # PLUGBOARD_COMMIT: where the tree was copied without a current .git (the GPU machine).
  echo "plugboard=${PLUGBOARD_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (dirty)')}"
  echo "gloo=libgloo-dev $(dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null || echo '?'), allreduce ${GLOO_ALGORITHM:-ring}"
  echo "openmpi=$(dpkg-query -W -f='${Version}' openmpi-bin 2>/dev/null || echo '?')"
  echo "nranks=$nranks"
  echo "sizes=$min_bytes..$max_bytes x2"
  echo "iters=$iters warmup=$warmup"
} > "$out/meta.txt"

# ---- runs ------------------------------------------------------------------------
failed=()
run() {  # run NAME CMD...: tee output to $out/NAME.txt, remember failures
  local name=$1; shift
  step "$name: $*"
  set +e
  "$@" 2>&1 | tee "$out/$name.txt"
  local rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" -eq 0 ] || { echo "run-host-bench: $name exited with status $rc" >&2; failed+=("$name"); }
}

for c in allreduce allgather; do
  run "plugboard_$c" "$perf" --mem host --nranks "$nranks" "${sizes[@]}" -C "$c" -d float --csv "$out/plugboard_$c.csv"
done
if [ -z "$gloo_skip" ]; then
  run gloo "$out/bin/gloo_bench" --nranks "$nranks" "${sizes[@]}" --algorithm "${GLOO_ALGORITHM:-ring}" \
    --csv "$out/gloo.csv"
else
  step "gloo: skipped ($gloo_skip)"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi_root=()
[ "$(id -u)" -eq 0 ] && mpi_root=(--allow-run-as-root)
# shellcheck disable=SC2086
run openmpi mpirun "${mpi_root[@]}" --oversubscribe --bind-to none -np "$nranks" \
  --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo ${MPIRUN_EXTRA:-} \
  "$out/bin/mpi_bench" "${sizes[@]}" --csv "$out/openmpi.csv"

# ---- comparison ------------------------------------------------------------------
step "comparison"
set +e
python3 "$here/compare.py" "$out" | tee "$out/table.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || failed+=(compare)
set -e
echo
echo "results in $out"
if [ ${#failed[@]} -gt 0 ]; then
  echo "run-host-bench: FAILED: ${failed[*]}" >&2
  exit 1
fi
