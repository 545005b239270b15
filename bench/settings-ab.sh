#!/usr/bin/env bash
# Host collectives under several settings in turn, ROUNDS times each, in one
# command: the median time per size (both of plugboard-perf's columns, out
# of place and in place, count as samples) and each setting's ratio to the
# first. For a choice whose effect is smaller than the machine's drift
# between runs; name a setting twice (A, A) to see the noise. Every
# side should set the same variables (their presence alone moved the CI
# kind's 4-rank 256 KiB allgather by up to 20%).
#
#   bench/settings-ab.sh "old:PLUGBOARD_HOST_DIRECT_BYTES=786432" "new:PLUGBOARD_HOST_DIRECT_BYTES=262144"
#
# Each argument is NAME:VAR=VALUE[,VAR=VALUE...]. Environment (defaults in
# brackets): NRANKS [4], COLLECTIVE [allgather], MIN [64K], MAX [1M], FACTOR
# [2], ITERS [200], WARMUP [10], ROUNDS [5], PLUGBOARD_PERF
# [build/bin/plugboard-perf], PLUGBOARD_TRANSPORTS [ethernet].
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 NAME:VAR=VALUE[,VAR=VALUE...] ..." >&2; exit 2; }
perf=${PLUGBOARD_PERF:-$root/build/bin/plugboard-perf}
unset PLUGBOARD_PERF  # not a setting: the ranks would warn about it
[ -x "$perf" ] || { echo "settings-ab: no plugboard-perf at $perf" >&2; exit 1; }
export PLUGBOARD_TRANSPORTS=${PLUGBOARD_TRANSPORTS:-ethernet}
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
for ((r = 1; r <= ${ROUNDS:-5}; r++)); do
  for side in "$@"; do
    name=${side%%:*} vars=${side#*:}
    IFS=, read -r -a assignments <<< "$vars"
    env "${assignments[@]}" "$perf" --mem host --nranks "${NRANKS:-4}" -b "${MIN:-64K}" -e "${MAX:-1M}" \
      -f "${FACTOR:-2}" -n "${ITERS:-200}" -w "${WARMUP:-10}" -C "${COLLECTIVE:-allgather}" -d float -c 0 |
      awk -v s="$name" 'NF > 10 && $1 ~ /^[0-9]+$/ {print s "," $1 "," $6; print s "," $1 "," $10}' >> "$raw"
  done
done
echo "# ${COLLECTIVE:-allgather}, ${NRANKS:-4} ranks, ${ROUNDS:-5} rounds in turn, $(nproc) cores;" \
  "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
python3 - "$raw" "$@" <<'PY'
import csv, statistics, sys
times = {}
for name, size, us in csv.reader(open(sys.argv[1])):
    times.setdefault((name, int(size)), []).append(float(us))
names = [a.split(":")[0] for a in sys.argv[2:]]
print(f"{'size':>8} " + " ".join(f"{n + ' us (ratio)':>20}" for n in names))
for s in sorted({s for (_, s) in times}):
    base = statistics.median(times[(names[0], s)])
    cells = [f"{statistics.median(times[(n, s)]):>11.1f} ({statistics.median(times[(n, s)]) / base:.2f})" for n in names]
    print(f"{s:>8} " + " ".join(f"{c:>20}" for c in cells))
PY
