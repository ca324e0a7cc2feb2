#!/usr/bin/env bash
# The main job: installs dependencies (Debian packages), builds kvq, and runs `kvq demo` on the
# embedded in-memory engine. Extra arguments go to `kvq demo` (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh build-demo -DKVQ_BUILD_TESTS=OFF -DKVQ_BUILD_BENCH=OFF
exec ./build-demo/kvq demo "$@"
