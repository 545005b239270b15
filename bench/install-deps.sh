#!/usr/bin/env bash
# Installs, by Debian package name, what bench/run-host-bench.sh needs on top
# of Plugboard's own build dependencies (tools/install-deps.sh): Gloo (with the
# hiredis/ibverbs headers its package depends on), Open MPI, and python3 for
# the comparison table. Skips packages already present.
set -euo pipefail

packages=(g++ python3 libgloo-dev libhiredis-dev libibverbs-dev openmpi-bin libopenmpi-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "bench/install-deps: all packages present"
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "bench/install-deps: missing ${missing[*]} and no apt-get here; install them by hand" >&2
  exit 1
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "bench/install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
