#!/usr/bin/env bash
# Tuning sweep of the GPU collectives' launch settings on the lent several-GPU
# machine: busbw of allreduce, allgather and sendrecv for every
# (gpu_blocks, gpu_chunk_bytes) pair; allreduce time at 32 KiB - 4 MiB for each
# gpu_allreduce_small_bytes in TUNE_SMALL (LL below it, the one-shot pipeline
# above); allreduce time beside NCCL's at 256 KiB - 64 MiB for each
# blocks:oneshot_bytes pair in TUNE_MID (gpu_blocks, gpu_allreduce_oneshot_bytes).
# Prints the tables last, logs under $OUT. An empty list skips its sweep
# (TUNE_BLOCKS="" skips the first).
#   OUT=/some/dir bash tests/gpu/tune.sh            (after tests/gpu/run.sh built build-gpu)
source "$(dirname "$0")/bench-env.sh"
table="$OUT/tune.tsv"
printf "blocks\tchunk\tcollective\tbytes\tbusbw_GBps\n" > "$table"
for blocks in ${TUNE_BLOCKS-16 32 64 128}; do
  for chunk in ${TUNE_CHUNKS:-131072 524288}; do
    scratch=$(( blocks * 4 * chunk ))
    for spec in "allreduce 256M" "allgather 256M" "sendrecv 1G"; do
      set -- $spec
      log="$OUT/tune-$1-$blocks-$chunk.log"
      PLUGBOARD_GPU_BLOCKS=$blocks PLUGBOARD_GPU_CHUNK_BYTES=$chunk PLUGBOARD_GPU_SCRATCH_BYTES=$scratch \
        timeout 120 "$perf" --mem gpu --nranks "${TUNE_NRANKS:-2}" -C "$1" -b "$2" -e "$2" -n 10 -w 3 -c 0 > "$log" 2>&1
      bw=$(awk '!/^#/ && NF > 8 {print $8}' "$log" | tail -1)
      printf "%s\t%s\t%s\t%s\t%s\n" "$blocks" "$chunk" "$1" "$2" "${bw:-FAIL}" >> "$table"
    done
  done
done
# The LL threshold: allreduce time at mid sizes for each gpu_allreduce_small_bytes
# (calls below it take the one-shot LL kernel, the rest the pipelines).
small="$OUT/tune-small.tsv"
printf "small_bytes\tbytes\ttime_us\n" > "$small"
for t in ${TUNE_SMALL-65536 1048576 4194304}; do
  log="$OUT/tune-small-$t.log"
  PLUGBOARD_GPU_ALLREDUCE_SMALL_BYTES=$t timeout 120 "$perf" --mem gpu --nranks "${TUNE_NRANKS:-2}" -C allreduce -b 32K -e 4M -f 2 \
    -n 100 -w 10 -c 0 > "$log" 2>&1
  awk -v t="$t" '!/^#/ && NF > 8 {printf "%s\t%s\t%s\n", t, $1, $6}' "$log" >> "$small"
done
# The pipelines above the LL threshold, beside NCCL: out-of-place time,
# NCCL's, and x_nccl (columns 6, 14 and 17 of plugboard-perf's rows).
mid="$OUT/tune-mid.tsv"
printf "blocks\toneshot_bytes\tbytes\ttime_us\tnccl_us\tx_nccl\n" > "$mid"
for pair in ${TUNE_MID-128:0 128:1073741824}; do
  blocks=${pair%%:*} oneshot=${pair#*:}
  log="$OUT/tune-mid-$blocks-$oneshot.log"
  PLUGBOARD_GPU_BLOCKS=$blocks PLUGBOARD_GPU_SCRATCH_BYTES=$(( blocks * 4 * 524288 )) \
    PLUGBOARD_GPU_ALLREDUCE_ONESHOT_BYTES=$oneshot timeout 120 "$perf" --mem gpu --nranks "${TUNE_NRANKS:-2}" --compare nccl \
    -C allreduce -b 256K -e 64M -f 2 -n 50 -w 10 -c 0 > "$log" 2>&1
  awk -v b="$blocks" -v o="$oneshot" '!/^#/ && NF > 8 {printf "%s\t%s\t%s\t%s\t%s\t%s\n", b, o, $1, $6, $14, $17}' \
    "$log" >> "$mid"
done
for t in "$table" "$small" "$mid"; do
  column -t -s $'\t' "$t" 2>/dev/null || cat "$t"
done
