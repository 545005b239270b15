#!/usr/bin/env bash
# End-to-end check of the install tree and of an out-of-tree transport:
#   1. cmake --install the build tree into a temporary prefix;
#   2. pkg-config and find_package(Plugboard) consumers build against it;
#   3. examples/third-party-plugin (the shm transport) builds against it,
#      from installed headers only;
#   4. the installed plugboard-plugin-check passes it;
#   5. 4 ranks run allreduce over it, chosen by environment, and 2 ranks run
#      allgather chosen by YAML (plugin_path + rules + a plugin setting).
# usage: test_third_party.sh <build dir> <source dir> [<libdir, default lib>]
set -euo pipefail

build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
libdir=${3:-lib}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/plugboard-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)

step() { echo; echo "=== $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

step "install $build into $prefix"
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
for f in "$libdir/libplugboard.so" include/plugboard/transport.h include/plugboard/communicator.hpp \
         bin/plugboard-perf bin/plugboard-plugin-check "$libdir/plugboard/libplugboard-ethernet.so" \
         "$libdir/cmake/Plugboard/PlugboardConfig.cmake" "$libdir/cmake/Plugboard/PlugboardConfigVersion.cmake" \
         "$libdir/pkgconfig/plugboard.pc"; do
  [[ -e $prefix/$f ]] || fail "not installed: $f"
done

step "pkg-config"
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
flags=$(pkg-config --cflags --libs plugboard) || fail "pkg-config --cflags --libs plugboard"
echo "pkg-config: $flags"
[[ $flags == *"-lplugboard"* && $flags == *"-I"* ]] || fail "pkg-config flags lack -I or -lplugboard: $flags"
cat > "$tmp/version.cpp" <<'CPP'
#include <plugboard/communicator.hpp>
#include <plugboard/transport.h>
#include <cstdio>
int main() { std::printf("libplugboard %s, transport ABI %d.%d\n", plugboard::libraryVersion(), PB_TRANSPORT_ABI_MAJOR, PB_TRANSPORT_ABI_MINOR); }
CPP
# shellcheck disable=SC2086  # word splitting of the flags is intended
${CXX:-c++} -std=c++17 "$tmp/version.cpp" -o "$tmp/version" $flags
LD_LIBRARY_PATH=$prefix/$libdir "$tmp/version"

step "find_package(Plugboard) consumer"
mkdir -p "$tmp/consumer"
cp "$tmp/version.cpp" "$tmp/consumer/version.cpp"
cat > "$tmp/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(consumer LANGUAGES CXX)
find_package(Plugboard 0.1 REQUIRED)
add_executable(version version.cpp)
target_link_libraries(version PRIVATE Plugboard::plugboard)
CMAKE
cmake -S "$tmp/consumer" -B "$tmp/consumer/build" "${generator[@]}" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/consumer.log" \
  || { cat "$tmp/consumer.log"; fail "configuring a find_package(Plugboard) consumer"; }
cmake --build "$tmp/consumer/build" > "$tmp/consumer-build.log" || { cat "$tmp/consumer-build.log"; fail "building it"; }
"$tmp/consumer/build/version"

step "build examples/third-party-plugin out of tree"
ex=$tmp/ex
cmake -S "$src/examples/third-party-plugin" -B "$ex" "${generator[@]}" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > "$tmp/ex.log" || { cat "$tmp/ex.log"; fail "configuring the example"; }
cmake --build "$ex" > "$tmp/ex-build.log" || { cat "$tmp/ex-build.log"; fail "building the example"; }
[[ -f $ex/libplugboard-shm.so ]] || fail "no $ex/libplugboard-shm.so"
# Only installed headers: nothing of the source tree may be on an include path.
if grep -E -- "-I *$src/(plugin-api|core)" "$ex/compile_commands.json"; then
  fail "the example was compiled against the source tree, not the install"
fi

step "plugboard-plugin-check"
"$prefix/bin/plugboard-plugin-check" "$ex/libplugboard-shm.so" || fail "the shm plugin does not pass plugboard-plugin-check"

step "4 ranks, allreduce, PLUGBOARD_TRANSPORTS=shm"
PLUGBOARD_TRANSPORTS=shm PLUGBOARD_PLUGIN_PATH=$ex \
  "$prefix/bin/plugboard-perf" --mem host --nranks 4 -b 8 -e 1M -f 4 -C allreduce -n 2 -w 1 | tee "$tmp/perf.out" \
  || fail "plugboard-perf over shm failed"
check_perf() {  # <output> <nranks>: rank 0 reaches every peer via shm, nothing wrong
  local out=$1 n=$2 p
  for ((p = 1; p < n; p++)); do
    grep -q "rank 0 -> rank $p via shm" "$out" || fail "rank 0 -> rank $p did not select shm"
  done
  if grep "via " "$out" | grep -v "via shm"; then fail "a pair selected another transport"; fi
  grep -q "Out of bounds values : 0 OK" "$out" || fail "wrong results"
  # Every row's #wrong columns (8th after the type/redop/root columns) are 0.
  awk '$1 ~ /^[0-9]+$/ && ($9 != 0 || $13 != 0) { bad = 1 } END { exit bad }' "$out" || fail "#wrong is not 0"
}
check_perf "$tmp/perf.out" 4

step "2 ranks, allgather, selected by YAML"
cat > "$tmp/job.yaml" <<YAML
plugin_path: $ex
transports: [shm, ethernet]
rules:
  - peers: same-host
    use: [shm]
  - peers: any
    use: [ethernet]
shm:
  ring_bytes: 1048576
YAML
PLUGBOARD_CONFIG=$tmp/job.yaml "$prefix/bin/plugboard-perf" --mem host --nranks 2 -b 8 -e 256K -f 8 -C allgather -n 2 -w 1 \
  | tee "$tmp/perf-yaml.out" || fail "plugboard-perf with $tmp/job.yaml failed"
check_perf "$tmp/perf-yaml.out" 2

echo
echo "PASS: install tree, pkg-config, find_package, out-of-tree shm plugin, conformance, 4-rank and YAML runs"
