#!/usr/bin/env bash
# Short runs of the main job and the benchmark programs, so CI notices if one breaks. The numbers
# printed here come from a loaded CI machine and are not the figures in docs/.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:?usage: scripts/smoke.sh BUILD_DIR}
"$build_dir/kvq" demo --seconds 3
for bench in "$build_dir"/bench/*_bench; do
  [ -x "$bench" ] || continue
  echo "--- $(basename "$bench") (smoke)"
  case $(basename "$bench") in
    tuple_bench) "$bench" --benchmark_min_time=0.05 ;;
    *) "$bench" --smoke ;;
  esac
done
"$build_dir/kvq" bench --seconds 0.5 --clients 1,4 >/dev/null && echo "kvq bench: ok"
