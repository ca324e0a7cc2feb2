#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/*_fuzz.cc) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, and runs each on a copy of its corpus (tests/fuzz/corpus/<target>/).
# A crash, sanitizer report or leak fails the run and leaves the input in build-fuzz/findings/.
# Usage:
#   scripts/fuzz.sh                 each target for 10,000,000 executions (long; not in CI)
#   scripts/fuzz.sh --seconds 20    each target for 20 s (the test command's short run)
# Targets run side by side, one per core.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/fuzz.sh [--seconds N]   (N: whole seconds per target, at least 1)"
limit=(-runs=10000000)
if [ $# -gt 0 ]; then
  if [ $# -ne 2 ] || [ "$1" != --seconds ] || ! [[ $2 =~ ^[1-9][0-9]*$ ]]; then
    echo "$usage" >&2
    exit 2
  fi
  limit=(-max_total_time="$2")
fi
bash scripts/install-deps.sh
# Only the fuzz targets and the rooms of kvq they link (tests/fuzz/CMakeLists.txt).
KVQ_BUILD_TARGETS=kvq_fuzz_targets bash scripts/build.sh build-fuzz -DCMAKE_CXX_COMPILER=clang++ \
  -DKVQ_BUILD_FUZZ=ON -DKVQ_SANITIZE=address,undefined,fuzzer-no-link -DKVQ_BUILD_TESTS=OFF \
  -DKVQ_BUILD_BENCH=OFF -DKVQ_BUILD_CLI=OFF -DKVQ_WITH_ROCKSDB=OFF -DKVQ_WITH_ETCD=ON -DKVQ_UNITY=ON
mkdir -p build-fuzz/findings

# Runs one target on a copy of its corpus; prints its summary lines and records its executions.
# Returns non-zero (after printing the log's tail) if it found anything. Runs in a background
# subshell: the fuzzer is its child, killed with it (TERM, from the trap below).
run_fuzzer() {
  local fuzzer=$1 name work status=0 executions fuzzer_pid=""
  trap 'kill ${fuzzer_pid:+"$fuzzer_pid"} 2>/dev/null; exit 143' TERM
  name=$(basename "$fuzzer" _fuzz)
  work=$(mktemp -d)
  cp -r "tests/fuzz/corpus/$name/." "$work/"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$fuzzer" "${limit[@]}" -max_len=4096 -print_final_stats=1 \
    -artifact_prefix=build-fuzz/findings/"$name"- "$work" >"$work.log" 2>&1 &
  fuzzer_pid=$!
  wait "$fuzzer_pid" || status=$?
  {
    echo "fuzz: $name (${limit[*]})"
    grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)' \
      "$work.log" || true
  } | sed "s/^/[$name] /"
  executions=$(awk '/^stat::number_of_executed_units/ { print $2 }' "$work.log")
  if [ -n "${KVQ_FIGURES_FILE:-}" ] && [ -n "$executions" ]; then
    printf 'fuzz: executions, %s\t%s\n' "$name" "$executions" >>"$KVQ_FIGURES_FILE"
  fi
  if [ "$status" -ne 0 ]; then
    tail -40 "$work.log" >&2
    echo "fuzz: $name FAILED (exit $status); inputs in build-fuzz/findings/" >&2
  fi
  rm -rf "$work" "$work.log"
  return "$status"
}

# As many targets at once as there are cores (each keeps a core for its whole time limit). If this
# script stops early, each run_fuzzer still running is stopped, and stops its fuzzer.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
failures=0
running=0
for fuzzer in build-fuzz/tests/fuzz/*_fuzz; do
  if [ "$running" -ge "$(nproc)" ]; then
    wait -n || failures=$((failures + 1))
    running=$((running - 1))
  fi
  run_fuzzer "$fuzzer" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || failures=$((failures + 1))
  running=$((running - 1))
done
[ "$failures" -eq 0 ] || { echo "fuzz: $failures target(s) failed" >&2; exit 1; }
echo "fuzz: every target ran clean"
