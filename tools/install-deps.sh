#!/usr/bin/env bash
# Installs what building and testing Plugboard needs, by Debian/Ubuntu
# package name. Skips packages already present, so it also runs where apt is
# unavailable but the packages are installed (e.g. the lent GPU machines).
set -euo pipefail

packages=(cmake ninja-build g++ pkg-config libyaml-cpp-dev libgtest-dev binutils libucx-dev libfabric-dev libibverbs-dev
          nlohmann-json3-dev iproute2 clang)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
# Header-only checks for machines without dpkg records of the -dev packages.
if [ -f /usr/include/yaml-cpp/yaml.h ] && [ -f /usr/include/gtest/gtest.h ] && command -v cmake >/dev/null \
   && ! command -v apt-get >/dev/null; then
  echo "install-deps: no apt here, but yaml-cpp, gtest and cmake are installed"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
