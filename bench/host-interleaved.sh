#!/usr/bin/env bash
# Plugboard's host collectives and Open MPI in turn, ROUNDS times, at small
# sizes: the median of each per size and their ratio. A machine whose speed
# drifts (the CI kind's noisy phases) moves both alike, which a run of one
# library after the other (run-host-bench.sh) cannot promise.
#
#   bench/host-interleaved.sh            (environment below; defaults in brackets)
#
# NRANKS [2], COLLECTIVE [allreduce|allgather: allgather], MIN [8], MAX [4K],
# FACTOR [8], ITERS [3000], WARMUP [200], ROUNDS [7], PLUGBOARD_PERF
# [build/bin/plugboard-perf], PLUGBOARD_TRANSPORTS [ethernet], OUT_DIR [a
# temporary directory: raw.csv there], PLUGBOARD_COMMIT [git's HEAD: the
# commit to print, for a tree whose .git lags, as on the device]. Open MPI: ob1 + btl tcp on lo, as in
# run-host-bench.sh; bench/mpi_bench.c is compiled with mpicc.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nranks=${NRANKS:-2} coll=${COLLECTIVE:-allgather} min=${MIN:-8} max=${MAX:-4K} factor=${FACTOR:-8}
iters=${ITERS:-3000} warmup=${WARMUP:-200} rounds=${ROUNDS:-7}
perf=${PLUGBOARD_PERF:-$root/build/bin/plugboard-perf}
commit=${PLUGBOARD_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}
# Not settings: the ranks would warn about unknown PLUGBOARD_ variables.
unset PLUGBOARD_PERF PLUGBOARD_COMMIT
out=${OUT_DIR:-$(mktemp -d)}
mkdir -p "$out"
export PLUGBOARD_TRANSPORTS=${PLUGBOARD_TRANSPORTS:-ethernet} OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -x "$perf" ] || { echo "host-interleaved: no plugboard-perf at $perf" >&2; exit 1; }
mpicc -O2 -std=c11 -o "$out/mpi_bench" "$root/bench/mpi_bench.c"
mpi_root=()
[ "$(id -u)" -eq 0 ] && mpi_root=(--allow-run-as-root)
sizes=(-b "$min" -e "$max" -f "$factor" -n "$iters" -w "$warmup")
raw="$out/raw.csv"
echo "library,size_bytes,time_us" > "$raw"
for ((r = 1; r <= rounds; r++)); do
  # Both of plugboard-perf's columns (out of place, in place) count as samples.
  "$perf" --mem host --nranks "$nranks" "${sizes[@]}" -C "$coll" -d float |
    awk 'NF > 10 && $1 ~ /^[0-9]+$/ {print "plugboard," $1 "," $6; print "plugboard," $1 "," $10}' >> "$raw"
  mpirun "${mpi_root[@]}" --oversubscribe --bind-to none -np "$nranks" --mca pml ob1 --mca btl tcp,self \
    --mca btl_tcp_if_include lo "$out/mpi_bench" "${sizes[@]}" |
    awk -F, -v c="$coll" '$1 == "openmpi" && $2 == c {print "openmpi," $4 "," $5}' >> "$raw"
done
echo "# $coll, $nranks ranks, $rounds rounds of each in turn, $iters iterations a size;" \
  "commit $commit, $(nproc) cores"
python3 - "$raw" <<'PY'
import csv, statistics, sys
times = {}
for row in csv.DictReader(open(sys.argv[1])):
    times.setdefault((row["library"], int(row["size_bytes"])), []).append(float(row["time_us"]))
sizes = sorted({s for (lib, s) in times if lib == "plugboard" and ("openmpi", s) in times})
print(f"{'size':>8} {'plugboard us':>13} {'openmpi us':>11} {'ratio':>6}")
ratios = []
for s in sizes:
    ours, mpi = statistics.median(times[("plugboard", s)]), statistics.median(times[("openmpi", s)])
    ratios.append(ours / mpi)
    print(f"{s:>8} {ours:>13.2f} {mpi:>11.2f} {ours / mpi:>6.2f}")
if ratios:
    print(f"geomean ratio (plugboard time / Open MPI time): {statistics.geometric_mean(ratios):.2f}")
PY
