#!/usr/bin/env bash
# Installs kvq from BUILD_DIR into a temporary prefix and builds + runs a separate project that finds
# it with find_package(kvq CONFIG).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:?usage: scripts/check-install.sh BUILD_DIR}
prefix=$(mktemp -d)
consumer_build=$(mktemp -d)
trap 'rm -rf "$prefix" "$consumer_build"' EXIT
cmake --install "$build_dir" --prefix "$prefix" >/dev/null
cmake -S tests/install_consumer -B "$consumer_build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
ninja -C "$consumer_build" >/dev/null
"$consumer_build/consumer"
