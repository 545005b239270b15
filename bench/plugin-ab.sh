#!/usr/bin/env bash
# Two builds of one transport plugin, A and B, copied into the build's
# plugin directory in turn, ROUNDS times each, under the same
# plugboard-perf: the median time per size and column (out of place, in
# place) and B's ratio to A. For a plugin change whose effect is smaller
# than the machine's drift between runs (the CI kind's phases move small
# calls by 15-30%): run it A against A first to see the noise.
#
#   bench/plugin-ab.sh A.so B.so            (environment below; defaults in brackets)
#
# PLUGIN [ethernet], NRANKS [2], COLLECTIVE [allreduce], MIN [8], MAX [32K],
# FACTOR [8], ITERS [3000], WARMUP [100], ROUNDS [4], PLUGBOARD_BUILD_DIR
# [build]. The build's own plugin is put back at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 2 ] || { echo "usage: $0 A.so B.so" >&2; exit 2; }
a=$(realpath "$1") b=$(realpath "$2")
plugin=${PLUGIN:-ethernet} build=${PLUGBOARD_BUILD_DIR:-$root/build}
so="$build/lib/plugboard/libplugboard-$plugin.so" perf="$build/bin/plugboard-perf"
[ -f "$so" ] && [ -x "$perf" ] || { echo "plugin-ab: no $so or $perf (build first)" >&2; exit 1; }
saved=$(mktemp) raw=$(mktemp)
cp "$so" "$saved"
trap 'cp "$saved" "$so"; rm -f "$saved" "$raw"' EXIT
for ((r = 1; r <= ${ROUNDS:-4}; r++)); do
  for side in A B; do
    if [ "$side" = A ]; then cp "$a" "$so"; else cp "$b" "$so"; fi
    PLUGBOARD_TRANSPORTS=$plugin "$perf" --mem host --nranks "${NRANKS:-2}" -b "${MIN:-8}" -e "${MAX:-32K}" \
      -f "${FACTOR:-8}" -n "${ITERS:-3000}" -w "${WARMUP:-100}" -C "${COLLECTIVE:-allreduce}" -d float -c 0 |
      awk -v s="$side" 'NF > 10 && $1 ~ /^[0-9]+$/ {print s ",oop," $1 "," $6; print s ",ip," $1 "," $10}' >> "$raw"
  done
done
echo "# $plugin, ${COLLECTIVE:-allreduce}, ${NRANKS:-2} ranks, ${ROUNDS:-4} rounds of A and B in turn; A=$a B=$b"
python3 - "$raw" <<'PY'
import csv, statistics, sys
t = {}
for side, col, size, us in csv.reader(open(sys.argv[1])):
    t.setdefault((col, int(size)), {}).setdefault(side, []).append(float(us))
print(f"{'column':6} {'size':>9} {'A us':>9} {'B us':>9} {'B/A':>6}")
for (col, size), d in sorted(t.items()):
    a, b = statistics.median(d["A"]), statistics.median(d["B"])
    print(f"{col:6} {size:>9} {a:9.1f} {b:9.1f} {b / a:6.3f}")
PY
