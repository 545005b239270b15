#!/usr/bin/env bash
# README command 1: install dependencies, build, and run the main job: a
# 4-rank collective benchmark on this machine's default transport (host
# memory over loopback through the ethernet plugin when there is no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
bash tools/build.sh
build=${PLUGBOARD_BUILD_DIR:-build}
exec "$build/bin/plugboard-perf" --nranks 4 -b 8 -e 16M -f 4 "$@"
