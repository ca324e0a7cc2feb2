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
# The consumer runs in well under a second: timeout (coreutils) stops a livelock (SIGTERM at 60 s,
# SIGKILL 10 s later), failing the check.
status=0
timeout -k 10 60 "$consumer_build/consumer" || status=$?
case $status in
  124 | 137) echo "check-install: consumer did not finish within 60 s (exit $status)" >&2; exit 1 ;;
  *) exit "$status" ;;
esac
