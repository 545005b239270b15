#!/usr/bin/env bash
# UCX and libfabric headers for the lent GPU machine, which has their
# runtimes but no -dev packages and no apt. Two steps:
#   bash tests/gpu/net-deps.sh prepare      (here: apt-get download + dpkg -x into .gpu-deps/)
#   carry .gpu-deps with the device call; there tests/gpu/run.sh runs
#   bash tests/gpu/net-deps.sh cmake-args   (prints CMake flags for the runtimes found,
#                                            writes .gpu-deps/pc/libfabric.pc)
# Without .gpu-deps, cmake-args prints nothing and the two plugins are skipped.
set -euo pipefail
cd "$(dirname "$0")/../.."
deps=$PWD/.gpu-deps

runtime() {  # an installed file of a library ($1: e.g. libucp.so.): linker cache, then a bounded search
  local hit
  hit=$(ldconfig -p 2>/dev/null | awk -v n="$1" 'index($1, n) == 1 {print $NF; exit}')
  [ -z "$hit" ] && hit=$(find /usr /opt -maxdepth 7 -name "$1*" \( -type f -o -type l \) 2>/dev/null | sort | head -1)
  echo "$hit"
}

case "${1:-}" in
  prepare)
    rm -rf "$deps" && mkdir -p "$deps/debs"
    (cd "$deps/debs" && apt-get download libucx-dev libfabric-dev nlohmann-json3-dev)
    for d in "$deps"/debs/*.deb; do dpkg -x "$d" "$deps/root"; done
    rm -rf "$deps/debs"
    echo "net-deps: headers under $deps/root/usr/include"
    ;;
  cmake-args)
    [ -d "$deps/root/usr/include" ] || exit 0
    inc=$deps/root/usr/include
    [ -d "$deps/root/usr/share/cmake/nlohmann_json" ] && echo "-Dnlohmann_json_DIR=$deps/root/usr/share/cmake/nlohmann_json"
    ucp=$(runtime libucp.so.); ucs=$(runtime libucs.so.); fab=$(runtime libfabric.so.)
    echo "net-deps: runtimes ucp=${ucp:-none} ucs=${ucs:-none} fabric=${fab:-none}" >&2
    if [ -n "$ucp" ] && [ -n "$ucs" ]; then
      echo "-DPLUGBOARD_UCP_INCLUDE_DIR=$inc -DPLUGBOARD_UCP_LIBRARY=$ucp -DPLUGBOARD_UCS_LIBRARY=$ucs"
    fi
    if [ -n "$fab" ]; then  # a linker name for the runtime, and a .pc pointing at it
      mkdir -p "$deps/pc" "$deps/lib"
      ln -sf "$fab" "$deps/lib/libfabric.so"
      printf 'Name: libfabric\nDescription: carried headers, installed runtime\nVersion: 1.17.0\nCflags: -I%s\nLibs: -L%s -lfabric\n' \
        "$inc" "$deps/lib" > "$deps/pc/libfabric.pc"
    fi
    ;;
  *) echo "usage: $0 prepare|cmake-args" >&2; exit 2 ;;
esac
