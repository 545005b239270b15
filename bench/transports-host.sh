#!/usr/bin/env bash
# Issue 13 target 4: the network plugins side by side on host buffers, one
# run: plugboard-perf's allreduce over ethernet (the reference), libfabric
# (tcp;ofi_rxm) and ucx (UCX_TLS=tcp, default settings and with
# UCX_PROGRESS_THREAD=0), one after another, then a table of times and
# ratios to ethernet. Plugins missing from the build are reported as such.
#   bash bench/transports-host.sh <build-dir> [nranks] [max-bytes] [iters]
# Prints the table last; each run's output goes to $LOG_DIR (default a temp dir).
set -u
build=${1:?usage: transports-host.sh <build-dir> [nranks] [max-bytes] [iters]}
nranks=${2:-2}
max=${3:-16M}
iters=${4:-200}
logs=${LOG_DIR:-$(mktemp -d)}
mkdir -p "$logs"
perf="$build/bin/plugboard-perf"
plugins="$build/lib/plugboard"

# name | environment for the run (the name up to its first '-' names the
# plugin); TRANSPORT_RUNS="name|env%name|env" replaces the list, whose
# first entry is the reference the ratios divide by.
runs=(
  "ethernet|PLUGBOARD_TRANSPORTS=ethernet"
  "libfabric|PLUGBOARD_TRANSPORTS=libfabric FI_PROVIDER=tcp;ofi_rxm"
  "ucx|PLUGBOARD_TRANSPORTS=ucx UCX_TLS=tcp"
  "ucx-nothread|PLUGBOARD_TRANSPORTS=ucx UCX_TLS=tcp PLUGBOARD_UCX_PROGRESS_THREAD=0"
)
[ -n "${TRANSPORT_RUNS:-}" ] && IFS=% read -r -a runs <<< "$TRANSPORT_RUNS"
# ROUNDS=k runs the whole list k times, alternating (columns name.1 ...
# name.k), so drift on a shared machine shows; FACTOR is -f (default 8);
# CHECK=1 checks every result (-c 1) and the table gives #wrong too.
rounds=${ROUNDS:-1}
names=()
for round in $(seq 1 "$rounds"); do
  for r in "${runs[@]}"; do
    name=${r%%|*}
    envs=${r#*|}
    plugin=${name%%-*}
    [ "$rounds" -gt 1 ] && name="$name.$round"
    names+=("$name")
    if [ ! -e "$plugins/libplugboard-$plugin.so" ]; then
      echo "not built: $plugins/libplugboard-$plugin.so" > "$logs/$name.log"
      continue
    fi
    # shellcheck disable=SC2086
    env $envs timeout 300 "$perf" --mem host --nranks "$nranks" -C allreduce -d float -b "${MIN_BYTES:-8}" -e "$max" \
      -f "${FACTOR:-8}" -n "$iters" -w 10 -c "${CHECK:-0}" > "$logs/$name.log" 2>&1
    echo "$name: rc=$?" >&2
  done
done

echo "## host allreduce, $nranks ranks, out-of-place time (us), ratio to ${names[0]}; commit ${PLUGBOARD_COMMIT:-unknown}"
python3 - "$logs" "${CHECK:-0}" "${names[@]}" <<'EOF'
import re, sys
logs, check, names = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
wrong = {}
times = {}
for n in names:
    t = {}
    for line in open(f"{logs}/{n}.log", errors="replace"):
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and f[2] == "float":
            t[int(f[0])] = float(f[5])
            wrong[(n, int(f[0]))] = f[8]
    times[n] = t
ref = names[0]
sizes = sorted(times[ref]) if times[ref] else sorted({s for t in times.values() for s in t})
print("| bytes | " + " | ".join(names) + " | " + " | ".join(f"{n}/{ref}" for n in names[1:]) + " |")
print("|---:|" + "---:|" * (2 * len(names) - 1))
for s in sizes:
    row = [(f"{times[n][s]:.2f}" + (f" ({wrong[(n, s)]} wrong)" if check else "")) if s in times[n] else "-"
           for n in names]
    eth = times[ref].get(s)
    ratios = [f"{times[n][s] / eth:.2f}x" if eth and s in times[n] else "-" for n in names[1:]]
    print(f"| {s} | " + " | ".join(row) + " | " + " | ".join(ratios) + " |")
for n in names:
    if not times[n]:
        print(f"{n}: no figures ({open(f'{logs}/{n}.log', errors='replace').read().strip()[-200:]})")
EOF
