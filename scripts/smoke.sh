#!/usr/bin/env bash
# Short runs of the main job, the CLI and every benchmark program, so CI notices if one breaks. The
# numbers printed here come from a short run on a loaded CI machine; the figures worth quoting are
# in docs/.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:?usage: scripts/smoke.sh BUILD_DIR}
kvq="$build_dir/kvq"

# bounded SECONDS NAME COMMAND...: runs COMMAND, stopped by timeout (coreutils) after SECONDS s
# (SIGTERM, then SIGKILL 10 s later), so a livelock fails CI instead of hanging it. The bounds are
# many times a normal run (the whole script takes about 10 s). Returns COMMAND's exit status;
# a run stopped by the timeout fails the script, naming NAME.
bounded() {
  local seconds=$1 name=$2 status=0
  shift 2
  timeout -k 10 "$seconds" "$@" || status=$?
  case $status in
    124) echo "smoke: $name did not finish within $seconds s: stopped by timeout" >&2; exit 1 ;;
    137) echo "smoke: $name was killed (SIGKILL: by timeout, if it ignored SIGTERM)" >&2; exit 1 ;;
  esac
  return "$status"
}

echo "--- kvq demo (small)"
bounded 120 "kvq demo" "$kvq" demo --items 4000 --quiet
echo "--- kvq CLI on a durable database"
db_dir=$(mktemp -d)
trap 'rm -rf "$db_dir"' EXIT
bounded 60 "kvq pq push" "$kvq" --db "rocksdb:$db_dir/db" pq push --priority 5 five
bounded 60 "kvq pq push" "$kvq" --db "rocksdb:$db_dir/db" pq push --priority 1 one
popped=$(bounded 60 "kvq pq pop-min" "$kvq" --db "rocksdb:$db_dir/db" pq pop-min)
test "$popped" = one
size=$(bounded 60 "kvq pq size" "$kvq" --db "rocksdb:$db_dir/db" pq size)
test "$size" = 1
bounded 60 "kvq dump" "$kvq" --db "rocksdb:$db_dir/db" dump
echo "--- kvq bench (short)"
bounded 300 "kvq bench" "$kvq" bench --seconds 0.3 --clients 1,4 --prefill 2000 >/dev/null
echo "kvq bench: ok"
echo "--- tuple_bench (short)"
bounded 300 tuple_bench "$build_dir/bench/tuple_bench" --benchmark_min_time=0.02 >/dev/null
echo "tuple_bench: ok"
echo "--- txn_bench (short)"
bounded 300 txn_bench "$build_dir/bench/txn_bench" --seconds=0.2 >/dev/null
echo "txn_bench: ok"
if [ -x "$build_dir/bench/rocksdb_bench" ]; then
  echo "--- rocksdb_bench (short)"
  bounded 300 rocksdb_bench "$build_dir/bench/rocksdb_bench" --seconds 0.3 --clients 1,4 \
    --dir "$db_dir/bench" >/dev/null
  echo "rocksdb_bench: ok"
fi
if [ -x "$build_dir/bench/etcd_bench" ]; then
  echo "--- etcd_bench (short, own etcd on loopback)"
  bounded 300 etcd_bench "$build_dir/bench/etcd_bench" --seconds 0.3 --clients 1,4 >/dev/null
  echo "etcd_bench: ok"
fi
