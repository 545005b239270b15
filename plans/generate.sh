#!/usr/bin/env bash
# Regenerates the shipped execution plans from plugboard_dsl's programs:
# plans/<program>/<n>ranks.json for 2-8 ranks over memory channels, and
# plans/<program>/port-<n>ranks.json for 2-4 ranks over port channels (not for
# the programs that read peer memory or use switch channels:
# plugboard_dsl.programs.MEMORY_ONLY).
# python/tests/test_dsl.py fails when a committed plan differs from this.
set -euo pipefail
cd "$(dirname "$0")/.."
for program in allgather_allpairs allgather_allpairs_get allgather_ring allreduce_allpairs allreduce_allpairs_blocks allreduce_allpairs_packets allreduce_allpairs_twoshot allreduce_packets allreduce_ring allreduce_switch alltoall_allpairs; do
  mkdir -p "plans/$program"
  for n in 2 3 4 5 6 7 8; do
    PYTHONPATH=python python3 -m plugboard_dsl "$program" --nranks "$n" -o "plans/$program/${n}ranks.json" > /dev/null
  done
  case "$program" in allgather_allpairs_get | allreduce_switch) continue ;; esac
  for n in 2 3 4; do
    PYTHONPATH=python python3 -m plugboard_dsl "$program" --nranks "$n" --channel port \
      -o "plans/$program/port-${n}ranks.json" > /dev/null
  done
done
echo "plans: regenerated $(find plans -name '*.json' | wc -l) plans"
