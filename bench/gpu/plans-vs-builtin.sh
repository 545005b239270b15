#!/usr/bin/env bash
# Issue 18's target: a plan-run allreduce (or COLLECTIVE) beside the built-in
# kernels of that collective (and NCCL where every rank has its own GPU) in one run, 2+ ranks,
# results checked (#wrong must be 0). On a one-GPU machine both ranks share
# the GPU: call it under CUDA MPS (tests/gpu/mps.sh: with_mps); NCCL refuses
# two ranks on one GPU, so its column is left out there.
#   bash bench/gpu/plans-vs-builtin.sh BUILD_DIR OUT_DIR
# Environment: COLLECTIVE (allreduce; PLANS must compute it), NRANKS (2), PLANS ("allreduce_allpairs_packets
# allreduce_packets allreduce_allpairs allreduce_allpairs_blocks allreduce_allpairs_twoshot allreduce_ring allreduce_switch"), MIN (1K), MAX (64M), FACTOR (4), ITERS (20),
# WARMUP (5), COMPARE_NCCL (1 when NRANKS <= the GPU count, else 0).
# Prints one table: time per size of each run and plan / built-in time (a
# switch plan's over the built-in SwitchChannel allreduce with gpu_switch: peers).
set -uo pipefail
build=${1:?usage: plans-vs-builtin.sh BUILD_DIR OUT_DIR}
out=${2:?usage: plans-vs-builtin.sh BUILD_DIR OUT_DIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/../.." && pwd)
perf="$build/bin/plugboard-perf"
n=${NRANKS:-2}
coll=${COLLECTIVE:-allreduce}
gpus=$(nvidia-smi -L 2> /dev/null | wc -l)
nccl=${COMPARE_NCCL:-$([ "$gpus" -ge "$n" ] && echo 1 || echo 0)}
sizes=(-b "${MIN:-1K}" -e "${MAX:-64M}" -f "${FACTOR:-4}" -n "${ITERS:-20}" -w "${WARMUP:-5}")
export NCCL_NVLS_ENABLE=0 PLUGBOARD_NVLS_ENABLE=0
failed=0

# run NAME COMMAND...: bounded in time; its output in OUT/NAME.txt.
run() {
  local name=$1; shift
  timeout 300 "$@" > "$out/$name.txt" 2>&1 || { echo "plans-vs-builtin: $name failed (rc $?)"; tail -5 "$out/$name.txt"; failed=1; }
}

cmp=()
[ "$nccl" = 1 ] && cmp=(--compare nccl)
run builtin "$perf" --mem gpu --nranks "$n" "${cmp[@]}" -C "$coll" "${sizes[@]}" --csv "$out/builtin.csv"
runs=(builtin)
# The built-in SwitchChannel allreduce over peer mappings (gpu_switch: peers,
# never multicast): the switch plans' algorithm, their same-run peer.
if [ "$coll" = allreduce ] && [[ " ${PLANS:-allreduce_switch} " == *switch* ]]; then
  PLUGBOARD_GPU_SWITCH=peers run builtin_switch "$perf" --mem gpu --nranks "$n" -C "$coll" "${sizes[@]}" \
    --csv "$out/builtin_switch.csv"
  runs+=(builtin_switch)
fi
for p in ${PLANS:-allreduce_allpairs_packets allreduce_packets allreduce_allpairs allreduce_allpairs_blocks allreduce_allpairs_twoshot allreduce_ring allreduce_switch}; do
  run "$p" "$perf" --mem gpu --nranks "$n" --plan "$here/plans/$p/${n}ranks.json" -C "$coll" "${sizes[@]}" \
    --csv "$out/$p.csv"
  runs+=("$p")
done

python3 - "$out" "$nccl" "${runs[@]}" <<'PY'
import csv, os, sys
out, nccl, runs = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
times, wrong = {}, 0
for r in runs:
    path = os.path.join(out, r + ".csv")
    if not os.path.exists(path):
        continue
    for row in csv.DictReader(open(path)):
        size = int(row["size_bytes"])
        times.setdefault(size, {})[r] = float(row["oop_time_us"])
        wrong += int(row["oop_wrong"] or 0)
        if nccl and r == "builtin" and row.get("nccl_oop_time_us"):
            times[size]["nccl"] = float(row["nccl_oop_time_us"])
cols = [c for c in (["nccl"] if nccl else []) + runs if any(c in v for v in times.values())]
plans = [c for c in cols if not c.startswith("builtin") and c != "nccl"]
# A switch plan's ratio is to the built-in switch algorithm where it ran.
peer = {p: "builtin_switch" if "switch" in p and "builtin_switch" in cols else "builtin" for p in plans}
head = ["size"] + [c + " us" for c in cols] + [p + "/" + peer[p] for p in plans]
print("| " + " | ".join(head) + " |")
print("|" + "---:|" * len(head))
for size in sorted(times):
    t = times[size]
    cells = [str(size)] + ["%.1f" % t[c] if c in t else "-" for c in cols]
    cells += ["%.2fx" % (t[p] / t[peer[p]]) if p in t and peer[p] in t else "-" for p in plans]
    print("| " + " | ".join(cells) + " |")
print(f"#wrong over every row: {wrong}")
sys.exit(1 if wrong else 0)
PY
[ $? -ne 0 ] && failed=1
exit $failed
