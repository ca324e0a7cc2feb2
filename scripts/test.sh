#!/usr/bin/env bash
# Installs dependencies (Debian packages), builds kvq and runs every test, in four configurations:
#   1. build/        RelWithDebInfo, warnings as errors, all engines, each file compiled on its own:
#                    every test, an install + find_package(kvq) consumer check, and smoke runs of
#                    the demo and benchmarks.
#   2. build-asan/   AddressSanitizer + UndefinedBehaviorSanitizer, all engines:
#                    scripts/check-style.sh (its clang-tidy on this build's units), every test.
#   3. build-tsan/   ThreadSanitizer, memory engine only: every test that runs more than one thread
#                    (tests/CMakeLists.txt lists those that do not). RocksDB and gRPC from Debian
#                    are not TSan-instrumented, so their internals would report false races; their
#                    engines' tests run in 1 and 2.
#   4. build-fuzz/   clang + libFuzzer + ASan/UBSan: every tests/fuzz target for 20 s.
# The sanitizer and fuzz builds compile each room of src/ in batches of files (KVQ_UNITY): the
# ASan + UBSan build of the library and CLI took 207 s instead of 318 s (374 against 582 CPU s).
# Set KVQ_TEST_CONFIGS to a subset (e.g. "release asan") to run fewer.
set -euo pipefail
cd "$(dirname "$0")/.."
configs=${KVQ_TEST_CONFIGS:-"release asan tsan fuzz"}
for config in $configs; do  # all of them before any runs
  case $config in
    release | asan | tsan | fuzz) ;;
    *) echo "unknown config $config in KVQ_TEST_CONFIGS (release asan tsan fuzz)" >&2; exit 2 ;;
  esac
done
jobs=$(nproc)
start=$(date +%s)
stamp() { echo "=== [$(( $(date +%s) - start ))s] $*"; }

bash scripts/install-deps.sh

# The figures the tests record (docs/reliability.md), one file per build directory.
figures() {
  export KVQ_FIGURES_FILE=$PWD/$1/figures.tsv
  mkdir -p "$1" && rm -f "$KVQ_FIGURES_FILE"
}

# One test more than there are cores: the tests wait (on etcd, fsyncs, timers) for about a quarter
# of their time. Release tests on 2 cores: -j2 used 76 % of the cores in 295 s, -j3 90 % in 244 s.
run_ctest() {
  local dir=$1
  figures "$dir"
  ctest --test-dir "$dir" -j"$((jobs + 1))" --output-on-failure --timeout 1200 --no-tests=error
}

for config in $configs; do
  case $config in
    release)
      stamp "release build"
      bash scripts/build.sh build -DKVQ_WERROR=ON -DKVQ_BUILD_TESTS=ON -DKVQ_BUILD_BENCH=ON \
        -DKVQ_WITH_ROCKSDB=ON -DKVQ_WITH_ETCD=ON -DKVQ_SANITIZE=
      stamp "release tests"
      run_ctest build
      stamp "install + find_package(kvq) consumer"
      bash scripts/check-install.sh build
      stamp "demo and benchmark smoke runs"
      bash scripts/smoke.sh build
      ;;
    asan)
      stamp "asan+ubsan build"
      bash scripts/build.sh build-asan -DKVQ_SANITIZE=address,undefined -DKVQ_BUILD_TESTS=ON \
        -DKVQ_BUILD_BENCH=OFF -DKVQ_WITH_ROCKSDB=ON -DKVQ_WITH_ETCD=ON -DKVQ_UNITY=ON
      stamp "style: include direction, file and function length, clang-format, clang-tidy"
      bash scripts/check-style.sh build-asan
      stamp "asan+ubsan tests"
      run_ctest build-asan  # sanitizer options: tests/CMakeLists.txt
      ;;
    tsan)
      stamp "tsan build"
      bash scripts/build.sh build-tsan -DKVQ_SANITIZE=thread -DKVQ_BUILD_TESTS=ON -DKVQ_WITH_ROCKSDB=OFF \
        -DKVQ_WITH_ETCD=OFF -DKVQ_BUILD_BENCH=OFF -DKVQ_UNITY=ON
      stamp "tsan tests"
      run_ctest build-tsan  # sanitizer options: tests/CMakeLists.txt
      ;;
    fuzz)
      stamp "libFuzzer targets, 20 s each (scripts/fuzz.sh; the long run is not in CI)"
      figures build-fuzz
      bash scripts/fuzz.sh --seconds 20
      ;;
  esac
done
stamp "all configurations passed: $configs"
echo "Figures of this run (docs/reliability.md):"
bash scripts/figures.sh build build-asan build-tsan build-fuzz
