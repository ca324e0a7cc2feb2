#!/usr/bin/env bash
# Regenerates every measurement behind the throughput targets (issue 12, docs/benchmarks.md), in
# one run, and writes OUT/summary.md: each target, the ratio measured, met or missed. Raw results
# stay beside it (OUT/*.json, OUT/*.txt) with plots (OUT/*.png). Run it on a quiet machine: the
# load average before and after is recorded, and CPU us per operation is printed beside ops/s.
#
#   memory     kvq bench, Queue and PriorityQueue, plain and high-contention pops, 1 and 32
#              clients, without and with flat combining (and combining with --favor-latency);
#              txn_bench set + commit at 1 and 8
#   rocksdb    kvq bench pushes with sync on, 1 and 32 clients, without and with combining
#   etcd       a 3-member etcd on loopback (Debian's etcd-server, temporary data directories,
#              stopped by pid): etcd_bench raw Txn vs kvq pushes at 16, high-contention pops 1 vs 16,
#              and 4 processes x 8 threads (kvq bench --processes 4) vs 1 process x 1 thread
#   depth      kvq bench --ops cycle with 10 and 100,000 items queued, on every engine
#   fair       bench/fair_bench (FairQueue pops against Queue's)
#   peers      scripts/bench-peers.sh (Redis, PostgreSQL; writes docs/peers.md and docs/peers.png)
#
# Usage: scripts/bench.sh [--seconds S] [--out DIR] [--build DIR] [--only "memory rocksdb ..."]
set -euo pipefail
caller_dir=$PWD  # a relative --out or --build is the caller's
cd "$(dirname "$0")/.."
source scripts/lib/args.sh
seconds=2
out=bench-results
build=build
parts="memory rocksdb etcd depth fair peers"
usage="usage: scripts/bench.sh [--seconds S] [--out DIR] [--build DIR] [--only \"$parts\"]"
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) need_value "$@"; seconds=$2; shift 2 ;;
    --out) need_value "$@"; out=$(from_caller "$2"); shift 2 ;;
    --build) need_value "$@"; build=$(from_caller "$2"); shift 2 ;;
    --only) need_value "$@"; parts=$2; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
need_positive --seconds "$seconds"
for part in $parts; do  # all of them before any runs
  case $part in
    memory | rocksdb | etcd | depth | fair | peers) ;;
    *) echo "--only: no part $part; $usage" >&2; exit 2 ;;
  esac
done

bash scripts/install-deps.sh jq
[ -x "$build/kvq" ] && [ -x "$build/bench/etcd_bench" ] ||
  bash scripts/build.sh "$build" -DKVQ_BUILD_BENCH=ON -DKVQ_WITH_ROCKSDB=ON -DKVQ_WITH_ETCD=ON
kvq=$build/kvq
mkdir -p "$out"
source scripts/lib/work_dir.sh
source scripts/lib/servers.sh
source scripts/lib/etcd.sh
make_work_dir bench

summary=$out/summary.md
{
  echo "# scripts/bench.sh, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "$(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg); $seconds s per point."
  echo
  echo "| target | measured | goal | verdict |"
  echo "|---|---|---|---|"
} >"$summary"

# ops/s of the kvq bench row (kind, mode, op, clients of all processes) in a JSON file, of the
# run with that many processes (default 1).
rate() {
  jq -r --arg k "$1" --arg m "$2" --arg o "$3" --argjson c "$4" --argjson p "${6:-1}" \
    '[.results[] | select(.kind == $k and .mode == $m and .op == $o and .clients == $c
                          and (.processes // 1) == $p)]
     | first.ops_per_s' "$5"
}
# A summary row: target name, measured ratio (numerator / denominator), goal, ≥ or ≤.
# NUM / DEN with two decimals, or "not measured" unless both are measurements: positive numbers
# (a row missing from the results gives jq's null or nothing; a run that did nothing, 0).
ratio() {  # NUM DEN
  if positive_number "$1" && positive_number "$2"; then
    awk -v n="$1" -v d="$2" 'BEGIN { printf "%.2f", n / d }'
  else
    echo "not measured"
  fi
}

verdict() {  # NAME NUM DEN GOAL [ge|le]: a target missing a measurement is "not measured", never met
  local name=$1 num=$2 den=$3 goal=$4 cmp=${5:-ge}
  local ratio
  ratio=$(ratio "$num" "$den")
  local met="not measured"
  [ "$ratio" = "not measured" ] || met=$(awk -v r="$ratio" -v g="$goal" -v c="$cmp" \
    'BEGIN { ok = (c == "ge" ? r >= g : r <= g); print ok ? "met" : "missed" }')
  local sign=">="
  [ "$cmp" = ge ] || sign="<="
  echo "| $name | $ratio | $sign $goal | $met |" >>"$summary"
}

bench_json() {  # NAME [kvq arguments...]: kvq bench --json into OUT/NAME.json, plot beside it
  local name=$1
  shift
  echo "=== $name: kvq $*" >&2
  "$kvq" "$@" --seconds "$seconds" --json --plot "$out/$name.png" >"$out/$name.json"
}

run_memory() {
  # Without combining, combined, and combined with leaders favouring latency (--favor-latency).
  for variant in plain combined latency; do
    local name=memory c="" label="" flags=()
    case $variant in
      combined) name=memory-combined c="+c" label=" (combined)" flags=(--combine) ;;
      latency)
        name=memory-combined-latency c="+cl" label=" (combined, favoring latency)"
        flags=(--combine --favor-latency)
        ;;
    esac
    bench_json "$name" bench --clients 1,32 "${flags[@]}"
    for kind in queue pq; do
      verdict "memory $kind hc pops 32/1$label" \
        "$(rate $kind "hc$c" pop 32 "$out/$name.json")" "$(rate $kind "hc$c" pop 1 "$out/$name.json")" 1.0
    done
    verdict "memory pushes 32/1$label" \
      "$(rate queue "plain$c" push 32 "$out/$name.json")" \
      "$(rate queue "plain$c" push 1 "$out/$name.json")" 1.0
    verdict "memory plain pops 32/1$label" \
      "$(rate queue "plain$c" pop 32 "$out/$name.json")" \
      "$(rate queue "plain$c" pop 1 "$out/$name.json")" 0.5
    local p99
    p99=$(jq -r '[.results[] | select(.kind == "queue" and .op == "push" and .clients == 32)]
                 | first.p99_us' "$out/$name.json")
    verdict "memory push p99 at 32 clients, ms$label" "$p99" 1000 2.0 le
  done
  "$build/bench/txn_bench" --json --threads=1,8 --no-reads --seconds="$seconds" >"$out/txn.json"
  verdict "memory set + commit 8/1" \
    "$(jq '[.results[] | select(.threads == 8)] | first.tx_per_s' "$out/txn.json")" \
    "$(jq '[.results[] | select(.threads == 1)] | first.tx_per_s' "$out/txn.json")" 1.0
}

run_rocksdb() {
  for combine in "" --combine; do
    local name=rocksdb-sync${combine:+-combined} c=${combine:+"+c"}
    rm -rf "$work/rocksdb"
    bench_json "$name" --db "rocksdb:$work/rocksdb" bench --kinds queue --modes plain --ops push \
      --clients 1,32 $combine
    verdict "rocksdb (sync) pushes 32/1${combine:+ (combined)}" \
      "$(rate queue "plain$c" push 32 "$out/$name.json")" \
      "$(rate queue "plain$c" push 1 "$out/$name.json")" 20
  done
}

run_etcd() {
  start_etcd_cluster 3
  echo "=== etcd: etcd_bench on 3 members" >&2
  "$build/bench/etcd_bench" --endpoints "$etcd_endpoints" --clients 1,16 --seconds "$seconds" \
    --json >"$out/etcd3.json"
  local er='[.results[] | select(.op == $o and .clients == 16)] | first.ops_per_s'
  local push
  for push in pq_push pq_push_comb; do
    verdict "etcd (3 members) $push / raw Txn, 16 clients" \
      "$(jq --arg o $push "$er" "$out/etcd3.json")" "$(jq --arg o raw_txn "$er" "$out/etcd3.json")" 2
  done
  for combine in "" --combine; do
    local name=etcd3-hc${combine:+-combined} c=${combine:+"+c"}
    bench_json "$name" --db "etcd://$etcd_endpoints" bench --kinds queue --modes hc --ops pop \
      --clients 1,16 --prefill 20000 $combine
    verdict "etcd (3 members) hc pops 16/1${combine:+ (combined)}" \
      "$(rate queue "hc$c" pop 16 "$out/$name.json")" "$(rate queue "hc$c" pop 1 "$out/$name.json")" 1.0
    # The same pops from 4 processes of 8 threads (each its own connection), against the 1 x 1 row.
    bench_json "$name-4x8" --db "etcd://$etcd_endpoints" bench --kinds queue --modes hc --ops pop \
      --processes 4 --clients 8 --prefill 20000 $combine
    verdict "etcd (3 members) hc pops, 4 processes x 8 threads / 1 x 1${combine:+ (combined)}" \
      "$(rate queue "hc$c" pop 32 "$out/$name-4x8.json" 4)" \
      "$(rate queue "hc$c" pop 1 "$out/$name.json")" 1.0
  done
  etcd_cluster_url="etcd://$etcd_endpoints"
}

run_depth() {
  local urls="memory: rocksdb:$work/depth-rocksdb"
  [ -n "${etcd_cluster_url:-}" ] && urls+=" $etcd_cluster_url"
  for url in $urls; do
    local engine=${url%%:*}
    for depth in 10 100000; do
      rm -rf "$work/depth-rocksdb"
      bench_json "depth-$engine-$depth" --db "$url" bench --kinds queue,pq --modes plain \
        --ops cycle --clients 1 --prefill "$depth"
    done
    for kind in queue pq; do
      verdict "$engine $kind cycle at 100,000 queued / at 10 (time per op)" \
        "$(rate $kind plain cycle 1 "$out/depth-$engine-10.json")" \
        "$(rate $kind plain cycle 1 "$out/depth-$engine-100000.json")" 2.0 le
    done
  done
}

run_fair() {
  echo "=== fair: fair_bench" >&2
  "$build/bench/fair_bench" "$seconds" | tee "$out/fair.txt" >&2
  # pops/s of a fair_bench row: structure, tenants, clients.
  fair_rate() { awk -v s="$1" -v t="$2" -v c="$3" '$1 == s && $2 == t && $3 == c { print $4 }' \
    "$out/fair.txt"; }
  local tenants clients
  for tenants in 1 10000; do
    for clients in 1 32; do
      verdict "FairQueue / Queue pops, $tenants tenants, $clients clients" \
        "$(fair_rate fair "$tenants" "$clients")" "$(fair_rate queue 0 "$clients")" 0.7
      verdict "FairQueue / Queue pops combined, $tenants tenants, $clients clients" \
        "$(fair_rate fair-comb "$tenants" "$clients")" "$(fair_rate queue-comb 0 "$clients")" 0.7
    done
  done
  # Context, no goal: 10,000 tenants against 10,000 plain Queues popped in turn (queues-rr), which
  # touch as many places in the store per pop as a fair pop must.
  echo "| FairQueue / 10,000 Queues popped in turn, 10,000 tenants, 1 client (context) |" \
    "$(ratio "$(fair_rate fair 10000 1)" "$(fair_rate queues-rr 10000 1)") | – | – |" >>"$summary"
}

run_peers() {
  bash scripts/bench-peers.sh --seconds "$seconds" --build "$build" | tee "$out/peers.txt" >&2
  echo "| peers: see docs/peers.md | | | read docs/peers.md |" >>"$summary"
}

for part in $parts; do
  "run_$part"  # each one of the parts checked above
done
{
  echo
  echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)."
} >>"$summary"
cat "$summary"
