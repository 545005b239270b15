#!/usr/bin/env bash
# Builds the libFuzzer targets in tests/fuzz with clang (ASan + UBSan +
# coverage) and runs each for FUZZ_SECONDS (default 30) from its seed corpus
# in tests/fuzz/corpus/<target>, FUZZ_JOBS targets (default: the core count)
# at once. A crash, a sanitizer report or an unexpected exception fails the
# run; the reproducer is kept under
# $FUZZ_OUT (default /tmp/plugboard-fuzz) and printed. Called by
# tools/test.sh (README command 2); PLUGBOARD_SKIP_FUZZ=1 leaves it out.
#   bash tools/fuzz.sh [target ...]
# A finding becomes a regression test: copy the reproducer into the
# target's corpus directory, which every run replays first.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-30}
out=${FUZZ_OUT:-/tmp/plugboard-fuzz}
cxx=${FUZZ_CXX:-clang++}
command -v "$cxx" > /dev/null || { echo "fuzz: $cxx not found (tools/install-deps.sh installs clang)"; exit 1; }
mkdir -p "$out"
flags=(-std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -Icore/include -Icore/src -Iplugin-api/include)
config_sources=(core/src/config/*.cpp core/src/error.cpp core/src/logger.cpp)
declare -A sources=(
  [fuzz_config]="tests/fuzz/fuzz_config.cpp ${config_sources[*]}"
  [fuzz_bootstrap_wire]="tests/fuzz/fuzz_bootstrap_wire.cpp core/src/bootstrap/wire.cpp core/src/net/socket.cpp core/src/error.cpp core/src/logger.cpp"
  [fuzz_ethernet_wire]="tests/fuzz/fuzz_ethernet_wire.cpp plugins/ethernet/src/wire.cpp plugins/ethernet/src/memory.cpp -Iplugins/ethernet/src"
  [fuzz_ethernet_stream]="tests/fuzz/fuzz_ethernet_stream.cpp plugins/ethernet/src/*.cpp core/src/net/socket.cpp -Iplugins/ethernet/src"
  [fuzz_ethernet_stripes]="-DPB_FUZZ_STRIPES=2 tests/fuzz/fuzz_ethernet_stream.cpp plugins/ethernet/src/*.cpp core/src/net/socket.cpp -Iplugins/ethernet/src"
  [fuzz_libfabric_wire]="tests/fuzz/fuzz_libfabric_wire.cpp plugins/libfabric/src/wire.cpp -Iplugins/libfabric/src"
  [fuzz_ucx_wire]="tests/fuzz/fuzz_ucx_wire.cpp plugins/ucx/src/wire.cpp -Iplugins/ucx/src"
  [fuzz_nvls_wire]="tests/fuzz/fuzz_nvls_wire.cpp plugins/nvls/src/wire.cpp -Iplugins/nvls/src"
  [fuzz_memory_descriptor]="tests/fuzz/fuzz_memory_descriptor.cpp core/src/communicator/memory_descriptor.cpp core/src/error.cpp core/src/logger.cpp"
  [fuzz_ib_verbs_wire]="tests/fuzz/fuzz_ib_verbs_wire.cpp plugins/ib-verbs/src/wire.cpp plugins/ib-verbs/src/hca_filter.cpp -Iplugins/ib-verbs/src"
  [fuzz_staging_header]="tests/fuzz/fuzz_staging_header.cpp core/src/communicator/staging_header.cpp core/src/error.cpp core/src/logger.cpp"
  [fuzz_plan]="tests/fuzz/fuzz_plan.cpp core/src/plans/plan_parse.cpp core/src/plans/plan_check.cpp core/src/plans/call_overlap.cpp core/src/error.cpp core/src/logger.cpp"
)
declare -A libs=([fuzz_config]="-lyaml-cpp" [fuzz_bootstrap_wire]="" [fuzz_ethernet_wire]="" [fuzz_ethernet_stream]="-lpthread" [fuzz_ethernet_stripes]="-lpthread" [fuzz_libfabric_wire]=""
                 [fuzz_ucx_wire]="" [fuzz_nvls_wire]="" [fuzz_memory_descriptor]="" [fuzz_plan]="" [fuzz_staging_header]="" [fuzz_ib_verbs_wire]="")
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_ethernet_stream fuzz_ethernet_stripes fuzz_config fuzz_bootstrap_wire fuzz_ethernet_wire fuzz_libfabric_wire
                                   fuzz_ucx_wire fuzz_nvls_wire fuzz_ib_verbs_wire fuzz_memory_descriptor fuzz_staging_header fuzz_plan)
# Builds and runs one target; its report goes to $out/$t.report.
fuzz_one() {
  local t=$1
  {
    echo "== $t: build"
    # shellcheck disable=SC2086
    "$cxx" "${flags[@]}" ${sources[$t]} ${libs[$t]} -o "$out/$t" || { echo "FAIL $t: did not build"; return 1; }
    mkdir -p "$out/$t.new" "$out/$t.artifacts"
    echo "== $t: ${seconds} s from tests/fuzz/corpus/$t"
    local rc=0
    "$out/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$out/$t.artifacts/" "$out/$t.new" "tests/fuzz/corpus/$t" > "$out/$t.log" 2>&1 || rc=$?
    if [ $rc -ne 0 ]; then
      echo "FAIL $t: a finding (log $out/$t.log, reproducer in $out/$t.artifacts/)"
      grep -E "ERROR|runtime error|terminate called|what\(\)" "$out/$t.log" | head -5
    fi
    grep -E "stat::number_of_executed_units|stat::new_units_added" "$out/$t.log" | sed "s/^/   $t /"
    return $rc
  } > "$out/$t.report" 2>&1
}
# FUZZ_JOBS targets at once (default: one per core); each prints its report
# when it ends.
jobs=${FUZZ_JOBS:-$(nproc)}
failed=0
declare -A running=()
reap() {
  local pid rc=0
  wait -n -p pid || rc=$?
  cat "$out/${running[$pid]}.report"
  [ $rc -eq 0 ] || failed=$((failed + 1))
  unset "running[$pid]"
}
for t in "${targets[@]}"; do
  [ -n "${sources[$t]:-}" ] || { echo "fuzz: no target named $t"; exit 2; }
  while [ ${#running[@]} -ge "$jobs" ]; do reap; done
  fuzz_one "$t" &
  running[$!]=$t
done
while [ ${#running[@]} -gt 0 ]; do reap; done
echo "fuzz: ${#targets[@]} target(s), $failed with findings"
[ $failed -eq 0 ]
