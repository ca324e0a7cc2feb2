#!/usr/bin/env bash
# The peer comparison (docs/peers.md): one priority-queue workload (16-byte values, random
# priorities 0-99; push for a fixed time, then pop the smallest) against
#   - Redis 7 (sorted set: ZADD / ZPOPMIN, one connection per client, no pipelining), without
#     persistence and with appendfsync always;
#   - PostgreSQL 15 (INSERT / DELETE ... FOR UPDATE SKIP LOCKED), synchronous_commit on and off;
#   - kvq on memory, and on RocksDB with sync on and off (plain and high-contention pops; memory
#     and RocksDB with sync on also with flat combining, -comb);
# at 1, 16 and 32 clients, interleaved in one run. Servers come from Debian's packages, listen on
# loopback ports with their own temporary data directories (a server counts only if it is the
# process started here, listening on its port itself: scripts/lib/servers.sh), and are stopped by
# process id (PostgreSQL by pg_ctl stop -m fast first). Writes docs/peers.md (table) and
# docs/peers.png (ops/s against clients), only when every measurement of the run succeeded.
#
# Usage: scripts/bench-peers.sh [--seconds S] [--clients "1 16 32"] [--build DIR]
set -euo pipefail
caller_dir=$PWD  # a relative --build is the caller's
cd "$(dirname "$0")/.."
source scripts/lib/args.sh
seconds=3
clients="1 16 32"
build=build
usage='usage: scripts/bench-peers.sh [--seconds S] [--clients "1 16 32"] [--build DIR]'
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) need_value "$@"; seconds=$2; shift 2 ;;
    --clients) need_value "$@"; clients=$2; shift 2 ;;
    --build) need_value "$@"; build=$(from_caller "$2"); shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
need_positive --seconds "$seconds"
for c in $clients; do
  [[ $c =~ ^[1-9][0-9]*$ ]] || { echo "--clients: $c is not a client count; $usage" >&2; exit 2; }
done

bash scripts/install-deps.sh redis-server redis-tools postgresql postgresql-contrib gnuplot-nox jq
[ -x "$build/kvq" ] || bash scripts/build.sh "$build" -DKVQ_WITH_ROCKSDB=ON -DKVQ_WITH_ETCD=OFF

load_before=$(cut -d" " -f1-3 /proc/loadavg)
source scripts/lib/work_dir.sh
source scripts/lib/servers.sh
make_work_dir peers
chmod 755 "$work"
results="$work/results.tsv"  # system  op  clients  ops_per_s
: >"$results"
record() {  # record SYSTEM OP CLIENTS OPS_PER_S; exits the script if OPS_PER_S is not a number
  [[ $4 =~ ^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$ ]] ||
    { echo "bench-peers: $1 $2 at $3 clients: no ops/s measured (\"$4\")" >&2; exit 1; }
  printf '%s\t%s\t%s\t%.0f\n' "$1" "$2" "$3" "$4" >>"$results"
}
# bench_failed WHAT LOG: exits the script, with the tail of the benchmark's output.
bench_failed() {
  echo "bench-peers: $1 failed; its output ($2):" >&2
  tail -15 "$2" >&2
  exit 1
}
# alive PID WHAT: exits the script unless our server PID still runs (a benchmark against its port
# would reach whatever took the port, or wait forever: redis-benchmark retries a refused
# connection without end).
alive() {
  kill -0 "$1" 2>/dev/null && return 0
  echo "bench-peers: our $2 (pid $1) has exited" >&2
  exit 1
}

# --- Redis -------------------------------------------------------------------------------------
start_redis() {  # start_redis NAME EXTRA_ARGS... -> sets redis_port, redis_pid
  redis_name=$1
  shift
  redis_args=("$@")
  mkdir -p "$work/$redis_name"
  start_servers 30 "redis ($redis_name)" start_redis_once
}
start_redis_once() {
  local log=$work/$redis_name/log
  redis_port=$(random_port)
  : >"$log"  # redis appends: a port taken in an earlier try must not count again
  redis-server --bind 127.0.0.1 --port "$redis_port" --dir "$work/$redis_name" --save '' \
    --daemonize no --logfile "$log" "${redis_args[@]}" &
  redis_pid=$!
  pids+=($!)
  servers="$redis_pid:$redis_port:$log"
  server_check=(redis-cli -p "$redis_port" ping)
}
redis_rate() {  # redis_rate PORT CLIENTS COMMAND... -> sets rate (requests per second)
  local port=$1 c=$2 log=$work/redis-benchmark.log
  shift 2
  local n=$((c * 4000))
  timeout 300 redis-benchmark -h 127.0.0.1 -p "$port" -c "$c" -n "$n" -r 1000000000 -P 1 -q "$@" \
    >"$log" 2>&1 || bench_failed "redis-benchmark -p $port -c $c $*" "$log"
  rate=$(tr '\r' '\n' <"$log" | grep -oE '[0-9.]+ requests per second' | tail -1 | cut -d' ' -f1) ||
    rate=""
  [ -n "$rate" ] || bench_failed "redis-benchmark -p $port -c $c $* (no requests per second)" "$log"
}
bench_redis() {  # bench_redis NAME PORT PID CLIENTS
  local name=$1 port=$2 pid=$3 c=$4
  alive "$pid" "redis ($name)"
  redis-cli -p "$port" del pq >/dev/null
  redis_rate "$port" "$c" ZADD pq __rand_int__ m:__rand_int__
  record "$name" push "$c" "$rate"
  alive "$pid" "redis ($name)"
  redis_rate "$port" "$c" ZPOPMIN pq
  record "$name" pop "$c" "$rate"
}

# --- PostgreSQL --------------------------------------------------------------------------------
pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
pg_seconds=$(awk -v s="$seconds" 'BEGIN { x = int(s + 0.5); print (x < 1 ? 1 : x) }')  # whole s
start_postgres() {
  mkdir -p "$work/pg"
  chown postgres "$work/pg"
  runuser -u postgres -- "$pg_bin/initdb" -D "$work/pg/data" -A trust -U postgres >/dev/null
  cleanup_steps+=(stop_postgres)
  start_servers 30 postgres start_postgres_once
  psql -h 127.0.0.1 -p "$pg_port" -U postgres -q -c \
    "CREATE TABLE pq (id bigserial PRIMARY KEY, priority int NOT NULL, value text NOT NULL);
     CREATE INDEX pq_order ON pq (priority, id);"
  echo "INSERT INTO pq (priority, value) VALUES (floor(random() * 100)::int, 'vvvvvvvvvvvvvvvv');" \
    >"$work/push.sql"
  echo "DELETE FROM pq WHERE id = (SELECT id FROM pq ORDER BY priority, id FOR UPDATE SKIP LOCKED
        LIMIT 1) RETURNING value;" >"$work/pop.sql"
}
# setpriv runs postgres in its own process (runuser would fork and wait), so the pid recorded is
# the postmaster's: the one that must listen on the port, and that the script waits for at exit.
start_postgres_once() {
  pg_port=$(random_port)
  setpriv --reuid=postgres --regid=postgres --init-groups -- "$pg_bin/postgres" \
    -D "$work/pg/data" -p "$pg_port" -c listen_addresses=127.0.0.1 \
    -c unix_socket_directories="$work/pg" -c max_connections=100 >"$work/pg/log" 2>&1 &
  pg_pid=$!
  pids+=($!)
  servers="$pg_pid:$pg_port:$work/pg/log"
  server_check=("$pg_bin/pg_isready" -h 127.0.0.1 -p "$pg_port")
}
stop_postgres() {  # at exit (cleanup_steps): a fast shutdown ends the backends too
  runuser -u postgres -- "$pg_bin/pg_ctl" stop -D "$work/pg/data" -m fast >/dev/null 2>&1
}
pg_rate() {  # pg_rate SYNC CLIENTS SCRIPT -> sets rate (transactions per second)
  local log=$work/pgbench.log
  alive "$pg_pid" postgres
  PGOPTIONS="-c synchronous_commit=$1" pgbench -h 127.0.0.1 -p "$pg_port" -U postgres -n \
    -c "$2" -j 2 -T "$pg_seconds" -f "$3" postgres >"$log" 2>&1 ||
    bench_failed "pgbench (synchronous_commit=$1, $2 clients, $3)" "$log"
  rate=$(grep -oE 'tps = [0-9.]+' "$log" | tail -1 | cut -d' ' -f3) || rate=""
  [ -n "$rate" ] || bench_failed "pgbench (synchronous_commit=$1, $2 clients, $3; no tps)" "$log"
}
bench_postgres() {  # bench_postgres SYNC CLIENTS
  alive "$pg_pid" postgres
  psql -h 127.0.0.1 -p "$pg_port" -U postgres -q -c "TRUNCATE pq"
  pg_rate "$1" "$2" "$work/push.sql"
  record "postgres-sync-$1" push "$2" "$rate"
  pg_rate "$1" "$2" "$work/pop.sql"
  record "postgres-sync-$1" pop "$2" "$rate"
}

# --- kvq ---------------------------------------------------------------------------------------
bench_kvq() {  # bench_kvq NAME URL CLIENTS [--combine]
  local name=$1 url=$2 c=$3
  shift 3
  "$build/kvq" --db "$url" bench --kinds pq --modes plain,hc --ops push,pop --clients "$c" \
    --seconds "$seconds" --json "$@" |
    jq -r '.results[] | [.mode, .op, .ops_per_s] | @tsv' |
    while IFS=$'\t' read -r mode op rate; do
      mode=${mode%+c}  # "hc+c": high-contention pops, combined (the name says -comb)
      [ "$op" = push ] && [ "$mode" = hc ] && continue  # pushes do not depend on the pop mode
      local label=$name
      [ "$op" = pop ] && label="$name-$mode"
      record "$label" "$op" "$c" "$rate"
    done
}

start_redis redis-nopersist --appendonly no
nopersist_port=$redis_port nopersist_pid=$redis_pid
start_redis redis-always --appendonly yes --appendfsync always
always_port=$redis_port always_pid=$redis_pid
start_postgres
for c in $clients; do
  echo "bench-peers: $c clients"
  bench_kvq kvq-memory memory: "$c"
  bench_kvq kvq-memory-comb memory: "$c" --combine
  bench_redis redis-nopersist "$nopersist_port" "$nopersist_pid" "$c"
  bench_postgres off "$c"
  rm -rf "$work/kvq-sync" "$work/kvq-nosync"
  bench_kvq kvq-rocksdb-sync "rocksdb:$work/kvq-sync" "$c"
  rm -rf "$work/kvq-sync"
  bench_kvq kvq-rocksdb-sync-comb "rocksdb:$work/kvq-sync" "$c" --combine
  bench_redis redis-always "$always_port" "$always_pid" "$c"
  bench_postgres on "$c"
  bench_kvq kvq-rocksdb-nosync "rocksdb:$work/kvq-nosync?sync=false" "$c"
done

# --- report ------------------------------------------------------------------------------------
# Written in $work first, and moved to docs/ once the table and the plot are both made.
{
  echo "# Peer comparison: one priority-queue workload"
  echo
  echo "Made by \`scripts/bench-peers.sh --seconds $seconds\` on $(date -u +%Y-%m-%d), nproc=$(nproc),"
  echo "load average before the run: $load_before. ops/s; 16-byte values, priorities 0-99,"
  echo "push for a fixed time then pop the smallest; one connection per client, no pipelining."
  echo
  printf '| system | op |'; for c in $clients; do printf ' %s clients |' "$c"; done; echo
  printf '|---|---|'; for _ in $clients; do printf -- '---:|'; done; echo
  cut -f1,2 "$results" | sort -u | while IFS=$'\t' read -r sys op; do
    printf '| %s | %s |' "$sys" "$op"
    for c in $clients; do
      printf ' %s |' "$(awk -F'\t' -v s="$sys" -v o="$op" -v c="$c" \
        '$1==s && $2==o && $3==c {print $4}' "$results")"
    done
    echo
  done
} >"$work/peers.md"
plot_data="$work/plot"
mkdir -p "$plot_data"
cut -f1,2 "$results" | sort -u | while IFS=$'\t' read -r sys op; do
  awk -F'\t' -v s="$sys" -v o="$op" '$1==s && $2==o {print $3, $4}' "$results" \
    >"$plot_data/$sys.$op"
done
{
  echo "set terminal png size 1200,700; set output '$work/peers.png'"
  echo "set multiplot layout 1,2; set logscale y; set xlabel 'clients'; set ylabel 'ops/s'"
  echo "set key outside bottom center horizontal font ',8'"
  for op in push pop; do
    echo "set title '$op'"
    printf 'plot '
    first=1
    for f in "$plot_data"/*."$op"; do
      [ $first -eq 1 ] || printf ', '
      printf "'%s' with linespoints title '%s'" "$f" "$(basename "$f" ".$op")"
      first=0
    done
    echo
  done
  echo "unset multiplot"
} | gnuplot
mv "$work/peers.md" docs/peers.md
mv "$work/peers.png" docs/peers.png
cat docs/peers.md
