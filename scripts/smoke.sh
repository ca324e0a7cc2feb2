#!/usr/bin/env bash
# Short runs of the main job, the CLI and every benchmark program, so CI notices if one breaks. The
# numbers printed here come from a short run on a loaded CI machine; the figures worth quoting are
# in docs/.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:?usage: scripts/smoke.sh BUILD_DIR}
kvq="$build_dir/kvq"

echo "--- kvq demo (small)"
"$kvq" demo --items 4000 --quiet
echo "--- kvq CLI on a durable database"
db_dir=$(mktemp -d)
trap 'rm -rf "$db_dir"' EXIT
"$kvq" --db "rocksdb:$db_dir/db" pq push --priority 5 five
"$kvq" --db "rocksdb:$db_dir/db" pq push --priority 1 one
test "$("$kvq" --db "rocksdb:$db_dir/db" pq pop-min)" = one
test "$("$kvq" --db "rocksdb:$db_dir/db" pq size)" = 1
"$kvq" --db "rocksdb:$db_dir/db" dump
echo "--- kvq bench (short)"
"$kvq" bench --seconds 0.3 --clients 1,4 --prefill 2000 >/dev/null
echo "kvq bench: ok"
echo "--- tuple_bench (short)"
"$build_dir/bench/tuple_bench" --benchmark_min_time=0.02 >/dev/null
echo "tuple_bench: ok"
echo "--- txn_bench (short)"
"$build_dir/bench/txn_bench" --seconds=0.2 >/dev/null
echo "txn_bench: ok"
if [ -x "$build_dir/bench/rocksdb_bench" ]; then
  echo "--- rocksdb_bench (short)"
  "$build_dir/bench/rocksdb_bench" --seconds 0.3 --clients 1,4 --dir "$db_dir/bench" >/dev/null
  echo "rocksdb_bench: ok"
fi
if [ -x "$build_dir/bench/etcd_bench" ]; then
  echo "--- etcd_bench (short, own etcd on loopback)"
  "$build_dir/bench/etcd_bench" --seconds 0.3 --clients 1,4 >/dev/null
  echo "etcd_bench: ok"
fi
