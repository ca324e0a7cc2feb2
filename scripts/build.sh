#!/usr/bin/env bash
# Configures and builds kvq into a build directory.
# Usage: scripts/build.sh BUILD_DIR [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:?usage: scripts/build.sh BUILD_DIR [cmake args...]}
shift
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
jobs=$(nproc)
ninja -C "$build_dir" -j"$jobs"
