#!/usr/bin/env bash
# Configures and builds kvq into a build directory.
# Usage: scripts/build.sh BUILD_DIR [extra cmake args...]
# Two choices that cut a third of a build's compile time (release: 1,191 -> 852 CPU seconds)
# without changing the code built:
#   - line tables only (-g1) in RelWithDebInfo: stack traces, perf and gdb backtraces keep file
#     and line; locals and types are gone (a Debug build has them). Full -g took a quarter to
#     two fifths of a compile (cmd_bench.cc 37.8 -> 22.3 s, conformance_test.cc 25.7 -> 19.4 s);
#   - lld (Debian's lld, scripts/install-deps.sh) links a test binary in 0.75 s, ld.bfd in 2.8 s.
# Sanitizer builds set their own -O1 -g1 (CMakeLists.txt).
# KVQ_BUILD_TARGETS (space-separated) builds those targets only (default: everything).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:?usage: scripts/build.sh BUILD_DIR [cmake args...]}
shift
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld \
  "$@" >/dev/null
jobs=$(nproc)
# shellcheck disable=SC2086  # one word per target
ninja -C "$build_dir" -j"$jobs" ${KVQ_BUILD_TARGETS:-}
