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
# Prints one table: time per size of each run, and each plan's time over the
# built-in kernel of the same algorithm (allreduce; other collectives: over
# the built-in default). The built-in runs with settings that pin its
# algorithm at every size (the LL sizes included):
#   builtin          defaults (NCCL beside it): LL one-shot up to gpu_allreduce_small_bytes,
#                    the peer of the LL plans (*_packets)
#   builtin_oneshot  LL off, one-shot at every size: allreduce_allpairs, allreduce_allpairs_blocks
#   builtin_twoshot  LL and one-shot off: allreduce_allpairs_twoshot, allreduce_ring (the same
#                    reduce-scatter + allgather volume; at 2 ranks the same steps)
#   builtin_switch   LL off, gpu_switch: peers (SwitchChannel over peer mappings): allreduce_switch
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
plans=${PLANS:-allreduce_allpairs_packets allreduce_packets allreduce_allpairs allreduce_allpairs_blocks allreduce_allpairs_twoshot allreduce_ring allreduce_switch}
# peer_of PLAN: the built-in run of PLAN's algorithm (see the top).
peer_of() {
  [ "$coll" = allreduce ] || { echo builtin; return; }
  case "$1" in
    *packets*) echo builtin ;;
    *switch*) echo builtin_switch ;;
    *twoshot* | *ring*) echo builtin_twoshot ;;
    *) echo builtin_oneshot ;;
  esac
}
# (one-shot past 2 ranks only while it sends less than 1 MiB more than two-shot: gpu_allreduce_oneshot_bytes)
declare -A peer_env=(
  [builtin_oneshot]="PLUGBOARD_GPU_ALLREDUCE_SMALL_BYTES=0 PLUGBOARD_GPU_ALLREDUCE_ONESHOT_BYTES=17179869184 PLUGBOARD_GPU_SWITCH=off"
  [builtin_twoshot]="PLUGBOARD_GPU_ALLREDUCE_SMALL_BYTES=0 PLUGBOARD_GPU_ALLREDUCE_ONESHOT_BYTES=0 PLUGBOARD_GPU_SWITCH=off"
  [builtin_switch]="PLUGBOARD_GPU_ALLREDUCE_SMALL_BYTES=0 PLUGBOARD_GPU_SWITCH=peers"
)
for peer in builtin_oneshot builtin_twoshot builtin_switch; do
  for p in $plans; do
    [ "$(peer_of "$p")" = "$peer" ] || continue
    # shellcheck disable=SC2086  # the assignments split into env's arguments
    run "$peer" env ${peer_env[$peer]} "$perf" --mem gpu --nranks "$n" -C "$coll" "${sizes[@]}" --csv "$out/$peer.csv"
    runs+=("$peer")
    break
  done
done
peers=()
for p in $plans; do peers+=("$p=$(peer_of "$p")"); done
for p in $plans; do
  run "$p" "$perf" --mem gpu --nranks "$n" --plan "$here/plans/$p/${n}ranks.json" -C "$coll" "${sizes[@]}" \
    --csv "$out/$p.csv"
  runs+=("$p")
done

python3 - "$out" "$nccl" "${runs[@]}" -- "${peers[@]}" <<'PY'
import csv, os, sys
cut = sys.argv.index("--")
out, nccl, runs = sys.argv[1], sys.argv[2] == "1", sys.argv[3:cut]
peer = dict(a.split("=", 1) for a in sys.argv[cut + 1:])
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
plans = [c for c in cols if c in peer]
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
