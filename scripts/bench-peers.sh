#!/usr/bin/env bash
# The peer comparison (docs/peers.md): one priority-queue workload (16-byte values, random
# priorities 0-99; push for a fixed time, then pop the smallest) against
#   - Redis 7 (sorted set: ZADD / ZPOPMIN, one connection per client, no pipelining), without
#     persistence and with appendfsync always;
#   - PostgreSQL 15 (INSERT / DELETE ... FOR UPDATE SKIP LOCKED), synchronous_commit on and off;
#   - kvq on memory, and on RocksDB with sync on and off (plain and high-contention pops; memory
#     and RocksDB with sync on also with flat combining, -comb);
# at 1, 16 and 32 clients, interleaved in one run. Servers come from Debian's packages, listen on
# loopback ports with their own temporary data directories, and are stopped by process id.
# Writes docs/peers.md (table) and docs/peers.png (ops/s against clients).
#
# Usage: scripts/bench-peers.sh [--seconds S] [--clients "1 16 32"] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=3
clients="1 16 32"
build=build
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "usage: scripts/bench-peers.sh [--seconds S] [--clients \"1 16 32\"] [--build DIR]" >&2
       exit 2 ;;
  esac
done

bash scripts/install-deps.sh redis-server redis-tools postgresql postgresql-contrib gnuplot-nox jq
[ -x "$build/kvq" ] || bash scripts/build.sh "$build" -DKVQ_WITH_ROCKSDB=ON -DKVQ_WITH_ETCD=OFF

load_before=$(cut -d" " -f1-3 /proc/loadavg)
source scripts/lib/work_dir.sh
make_work_dir peers
chmod 755 "$work"
results="$work/results.tsv"  # system  op  clients  ops_per_s
: >"$results"
record() { printf '%s\t%s\t%s\t%.0f\n' "$1" "$2" "$3" "$4" >>"$results"; }

free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 20000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
  done
}
wait_for() {  # wait_for DESCRIPTION COMMAND...: polls COMMAND for up to 30 s
  local what=$1; shift
  for _ in $(seq 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "bench-peers: $what did not start" >&2
  exit 1
}

# --- Redis -------------------------------------------------------------------------------------
start_redis() {  # start_redis NAME EXTRA_ARGS... -> sets redis_port
  local name=$1; shift
  redis_port=$(free_port)
  mkdir -p "$work/$name"
  redis-server --bind 127.0.0.1 --port "$redis_port" --dir "$work/$name" --save '' \
    --daemonize no --logfile "$work/$name/log" "$@" &
  pids+=($!)
  wait_for "redis ($name)" redis-cli -p "$redis_port" ping
}
redis_rate() {  # redis_rate PORT CLIENTS COMMAND... -> requests per second
  local port=$1 c=$2; shift 2
  local n=$((c * 4000))
  redis-benchmark -h 127.0.0.1 -p "$port" -c "$c" -n "$n" -r 1000000000 -P 1 -q "$@" |
    tr '\r' '\n' | grep -oE '[0-9.]+ requests per second' | tail -1 | cut -d' ' -f1
}
bench_redis() {  # bench_redis NAME PORT CLIENTS
  local name=$1 port=$2 c=$3
  redis-cli -p "$port" del pq >/dev/null
  record "$name" push "$c" "$(redis_rate "$port" "$c" ZADD pq __rand_int__ m:__rand_int__)"
  record "$name" pop "$c" "$(redis_rate "$port" "$c" ZPOPMIN pq)"
}

# --- PostgreSQL --------------------------------------------------------------------------------
pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
pg_seconds=$(awk -v s="$seconds" 'BEGIN { x = int(s + 0.5); print (x < 1 ? 1 : x) }')  # whole s
start_postgres() {
  pg_port=$(free_port)
  mkdir -p "$work/pg"
  chown postgres "$work/pg"
  runuser -u postgres -- "$pg_bin/initdb" -D "$work/pg/data" -A trust -U postgres >/dev/null
  runuser -u postgres -- "$pg_bin/postgres" -D "$work/pg/data" -p "$pg_port" \
    -c listen_addresses=127.0.0.1 -c unix_socket_directories="$work/pg" \
    -c max_connections=100 >"$work/pg/log" 2>&1 &
  pids+=($!)
  wait_for postgres "$pg_bin/pg_isready" -h 127.0.0.1 -p "$pg_port"
  psql -h 127.0.0.1 -p "$pg_port" -U postgres -q -c \
    "CREATE TABLE pq (id bigserial PRIMARY KEY, priority int NOT NULL, value text NOT NULL);
     CREATE INDEX pq_order ON pq (priority, id);"
  echo "INSERT INTO pq (priority, value) VALUES (floor(random() * 100)::int, 'vvvvvvvvvvvvvvvv');" \
    >"$work/push.sql"
  echo "DELETE FROM pq WHERE id = (SELECT id FROM pq ORDER BY priority, id FOR UPDATE SKIP LOCKED
        LIMIT 1) RETURNING value;" >"$work/pop.sql"
}
pg_rate() {  # pg_rate SYNC CLIENTS SCRIPT -> transactions per second
  PGOPTIONS="-c synchronous_commit=$1" pgbench -h 127.0.0.1 -p "$pg_port" -U postgres -n \
    -c "$2" -j 2 -T "$pg_seconds" -f "$3" postgres 2>&1 |
    grep -oE 'tps = [0-9.]+' | tail -1 | cut -d' ' -f3
}
bench_postgres() {  # bench_postgres SYNC CLIENTS
  psql -h 127.0.0.1 -p "$pg_port" -U postgres -q -c "TRUNCATE pq"
  record "postgres-sync-$1" push "$2" "$(pg_rate "$1" "$2" "$work/push.sql")"
  record "postgres-sync-$1" pop "$2" "$(pg_rate "$1" "$2" "$work/pop.sql")"
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
nopersist_port=$redis_port
start_redis redis-always --appendonly yes --appendfsync always
always_port=$redis_port
start_postgres
for c in $clients; do
  echo "bench-peers: $c clients"
  bench_kvq kvq-memory memory: "$c"
  bench_kvq kvq-memory-comb memory: "$c" --combine
  bench_redis redis-nopersist "$nopersist_port" "$c"
  bench_postgres off "$c"
  rm -rf "$work/kvq-sync" "$work/kvq-nosync"
  bench_kvq kvq-rocksdb-sync "rocksdb:$work/kvq-sync" "$c"
  rm -rf "$work/kvq-sync"
  bench_kvq kvq-rocksdb-sync-comb "rocksdb:$work/kvq-sync" "$c" --combine
  bench_redis redis-always "$always_port" "$c"
  bench_postgres on "$c"
  bench_kvq kvq-rocksdb-nosync "rocksdb:$work/kvq-nosync?sync=false" "$c"
done

# --- report ------------------------------------------------------------------------------------
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
} >docs/peers.md
plot_data="$work/plot"
mkdir -p "$plot_data"
cut -f1,2 "$results" | sort -u | while IFS=$'\t' read -r sys op; do
  awk -F'\t' -v s="$sys" -v o="$op" '$1==s && $2==o {print $3, $4}' "$results" \
    >"$plot_data/$sys.$op"
done
{
  echo "set terminal png size 1200,700; set output 'docs/peers.png'"
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
cat docs/peers.md
