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

runtime() {  # the first installed file of a library, by soname pattern
  ls /usr/lib/x86_64-linux-gnu/$1 /usr/lib64/$1 /usr/lib/$1 2>/dev/null | head -1
}

case "${1:-}" in
  prepare)
    rm -rf "$deps" && mkdir -p "$deps/debs"
    (cd "$deps/debs" && apt-get download libucx-dev libfabric-dev)
    for d in "$deps"/debs/*.deb; do dpkg -x "$d" "$deps/root"; done
    rm -rf "$deps/debs"
    echo "net-deps: headers under $deps/root/usr/include"
    ;;
  cmake-args)
    [ -d "$deps/root/usr/include" ] || exit 0
    inc=$deps/root/usr/include
    ucp=$(runtime 'libucp.so.[0-9]*'); ucs=$(runtime 'libucs.so.[0-9]*'); fab=$(runtime 'libfabric.so.[0-9]*')
    if [ -n "$ucp" ] && [ -n "$ucs" ]; then
      echo "-DPLUGBOARD_UCP_INCLUDE_DIR=$inc -DPLUGBOARD_UCP_LIBRARY=$ucp -DPLUGBOARD_UCS_LIBRARY=$ucs"
    fi
    if [ -n "$fab" ]; then
      mkdir -p "$deps/pc"
      printf 'Name: libfabric\nDescription: carried headers, installed runtime\nVersion: 1.17.0\nCflags: -I%s\nLibs: %s\n' \
        "$inc" "$fab" > "$deps/pc/libfabric.pc"
    fi
    ;;
  *) echo "usage: $0 prepare|cmake-args" >&2; exit 2 ;;
esac
