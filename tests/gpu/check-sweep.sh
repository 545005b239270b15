#!/usr/bin/env bash
# The repeated correctness sweep of plugboard-perf on GPU buffers (-c 1:
# every element of every row checked, out of place and in place): first
# the commands of issue 12 that returned wrong values, each repeated, then
# every type x op of allreduce and the other collectives at sizes 35 B -
# 35 MB (x10: the LL, one-shot and two-shot paths at the defaults).
# Prints one line per run and a table last; exits non-zero if any value
# was wrong or any run failed.
#   bash tests/gpu/check-sweep.sh BUILD_DIR [NRANKS]   (under MPS on one GPU: tests/gpu/mps.sh)
# SWEEP=repro runs only the issue's commands.
set -uo pipefail
build=${1:-build-gpu}
nranks=${2:-2}
perf="$build/bin/plugboard-perf"
export NCCL_NVLS_ENABLE=0 PLUGBOARD_NVLS_ENABLE=0
failed=0
table=""

# run LABEL ARGS...: one plugboard-perf run, its wrong count and status.
run() {
  local label=$1; shift
  local out rc wrong
  out=$(timeout 300 "$perf" --mem gpu -n 3 -w 1 -c 1 "$@" 2>&1); rc=$?
  wrong=$(sed -n 's/^# Out of bounds values : \([0-9]*\).*/\1/p' <<< "$out")
  [[ -z "$wrong" ]] && wrong="?"
  local result=ok
  if [[ $rc -ne 0 || "$wrong" != "0" ]]; then result=FAIL; failed=1; echo "$out" | tail -20; fi
  echo "# $label: $*"
  grep -E "^ +[0-9]" <<< "$out"  # the rows: times beside #wrong
  line=$(printf "%-58s wrong %-6s rc %-3s %s" "$label" "$wrong" "$rc" "$result")
  echo "$line"
  table+="$line"$'\n'
}

# Issue 12's table, three runs each.
for i in 1 2 3; do
  run "repro half max 6..600006 (run $i)" --nranks 2 -C allreduce -b 6 -e 600006 -f 10 -d half -o max
  run "repro half max 600000 (run $i)" --nranks 2 -C allreduce -b 600000 -e 600000 -d half -o max
  run "repro float max 600000 (run $i)" --nranks 2 -C allreduce -b 600000 -e 600000 -d float -o max
  run "repro bf16 min 3 ranks 6..600006 (run $i)" --nranks 3 -C allreduce -b 6 -e 600006 -f 10 -d bfloat16 -o min
  run "repro float sum 7..3000007 (run $i)" --nranks 2 -C allreduce -b 7 -e 3000007 -f 9 -d float
  run "repro sendrecv 7..7000007 (run $i)" --nranks 2 -C sendrecv -b 7 -e 7000007 -f 10
done
[[ "${SWEEP:-all}" == repro ]] && { printf "\n== correctness sweep (issue 12's commands only)\n%s" "$table"; exit $failed; }
# Every type and op of allreduce, odd sizes across the LL, one-shot and two-shot paths.
for t in int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double f8e4m3 f8e5m2; do
  for o in sum prod min max avg; do
    run "allreduce $t $o $nranks ranks 35..35000035" --nranks "$nranks" -C allreduce -b 35 -e 35000035 -f 10 -d "$t" -o "$o"
  done
done
# The other collectives, two types each.
for c in reducescatter reduce broadcast allgather alltoall sendrecv; do
  for t in half f8e5m2 double; do
    run "$c $t $nranks ranks 35..35000035" --nranks "$nranks" -C "$c" -b 35 -e 35000035 -f 10 -d "$t" -o max
  done
done

echo
echo "== correctness sweep ($nranks ranks where not stated; -n 3 -w 1 -c 1)"
printf "%s" "$table"
exit $failed
