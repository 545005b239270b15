#!/usr/bin/env bash
# Issue 19: what a PreMulSum costs over a plain Sum of the same call, on the
# same sweep in one run (plugboard-perf -o premulsum runs a PreMulSum of
# scalar 1, so the usual result check holds). With --compare nccl (COMPARE=1,
# a GPU per rank: NCCL refuses two ranks on one GPU) the real NCCL's Sum and
# PreMulSum run beside ours.
#   bash bench/gpu/premul-vs-sum.sh BUILD_DIR [NRANKS]   (under MPS for ranks sharing a GPU)
set -u
build=${1:?usage: premul-vs-sum.sh BUILD_DIR [NRANKS]}
nr=${2:-2}
cmp=()
[ "${COMPARE:-0}" = 1 ] && cmp=(--compare nccl)
status=0
for coll in reducescatter allreduce; do
  for op in sum premulsum; do
    echo "## $coll -o $op, $nr ranks"
    "$build/bin/plugboard-perf" --mem gpu --nranks "$nr" "${cmp[@]}" -C "$coll" -o "$op" -d "${DTYPE:-float}" \
      -b "${MIN:-64K}" -e "${MAX:-256M}" -f 4 -n "${ITERS:-20}" -w 5 -c 1 || status=1
  done
done
exit $status
