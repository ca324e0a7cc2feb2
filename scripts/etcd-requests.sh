#!/usr/bin/env bash
# etcd requests per pop, counted by etcd itself (docs/benchmarks.md): runs bench/fair_bench rows
# against a fresh 1-member etcd on loopback (scripts/lib/etcd.sh, --unsafe-no-fsync), reading the
# member's grpc_server_handled_total counters for Range and Txn (the requests kvq's reads and
# commits send), and grpc_server_started_total for Watch (the streams its waits open), before and
# after each row. A second run of the row for 0 s (its prefill and
# warm-up alone) is subtracted, so the figure is the pops' own. Requests per pop do not depend on
# the machine's load the way pops/s do.
#
# Usage: scripts/etcd-requests.sh [--seconds S] [--build DIR] "KIND TENANTS CLIENTS [PROCESSES]"...
#   KIND, TENANTS, CLIENTS, PROCESSES: fair_bench's (bench/fair_bench.cc), e.g.
#   scripts/etcd-requests.sh "queue 1 1" "queue-hc 1 32" "fair-hc 10000 32" "queue-hc 1 8 4"
set -euo pipefail
caller_dir=$PWD  # a relative --build is the caller's
cd "$(dirname "$0")/.."
source scripts/lib/args.sh
seconds=2
build=build
usage='usage: scripts/etcd-requests.sh [--seconds S] [--build DIR] "KIND TENANTS CLIENTS [PROCESSES]"...'
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) need_value "$@"; seconds=$2; shift 2 ;;
    --build) need_value "$@"; build=$(from_caller "$2"); shift 2 ;;
    -*) echo "$usage" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
need_positive --seconds "$seconds"
for row in "$@"; do
  read -r kind tenants clients processes extra <<<"$row"
  if ! [[ -n $kind && $tenants =~ ^[0-9]+$ && $clients =~ ^[0-9]+$ &&
          ${processes:-1} =~ ^[0-9]+$ && -z $extra ]]; then
    echo "row \"$row\": not KIND TENANTS CLIENTS [PROCESSES]; $usage" >&2
    exit 2
  fi
done
[ -x "$build/bench/fair_bench" ] || { echo "no $build/bench/fair_bench: build first" >&2; exit 2; }

source scripts/lib/work_dir.sh
source scripts/lib/servers.sh
source scripts/lib/etcd.sh
make_work_dir etcd-requests
start_etcd_cluster 1 --unsafe-no-fsync
url="etcd://$etcd_endpoints"
die() { echo "etcd-requests: $*" >&2; exit 1; }

# Range and Txn requests the member has answered so far, and Watch streams it has opened (kvq
# opens one per watch armed), both from HTTP GET /metrics over bash's /dev/tcp: sets
# counts=(requests watches). Exits the script if the member does not answer with those metrics.
requests() {
  local host=${etcd_endpoints%:*} port=${etcd_endpoints##*:} out
  exec 3<>"/dev/tcp/$host/$port" || die "cannot reach etcd's /metrics at $etcd_endpoints"
  printf 'GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n' "$etcd_endpoints" >&3
  out=$(awk '/^grpc_server_handled_total\{/ { seen = 1 }
             /^grpc_server_handled_total\{/ && /grpc_method="(Range|Txn)"/ { n += $NF }
             /^grpc_server_started_total\{/ && /grpc_method="Watch"/ { w += $NF }
             END { if (!seen) exit 1; printf "%d %d\n", n, w }' <&3) ||
    die "no grpc_server_handled_total in etcd's /metrics ($etcd_endpoints)"
  exec 3<&-
  read -r -a counts <<<"$out"
}

# Runs one fair_bench row (KIND TENANTS CLIENTS PROCESSES) for $1 seconds; sets m_requests,
# m_watches (counted by etcd during the run), m_rate (pops/s) and m_cpu (cpu_us/pop). Exits the
# script if fair_bench fails or prints no row for KIND.
measure() {
  local s=$1 before out line row_kind status=0
  shift
  requests
  before=("${counts[@]}")
  out=$("$build/bench/fair_bench" "$s" "$url" "$@") || status=$?
  [ "$status" -eq 0 ] || die "fair_bench $s $url $* failed (exit $status)"
  line=$(tail -1 <<<"$out")
  read -r row_kind _ _ m_rate _ m_cpu _ <<<"$line"
  [[ $row_kind == "$1" && $m_rate =~ ^[0-9]+(\.[0-9]+)?$ && $m_cpu =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
    die "fair_bench $s $url $* printed no row for $1 (last line: $line)"
  requests
  m_requests=$((counts[0] - before[0]))
  m_watches=$((counts[1] - before[1]))
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $seconds s per row; 1-member etcd"
printf '%-39s %12s %11s %10s %12s\n' "row (kind tenants clients [processes])" "requests/pop" \
  "watches/pop" "pops/s" "cpu_us/pop"
for row in "$@"; do
  read -r kind tenants clients processes <<<"$row"
  measure "$seconds" "$kind" "$tenants" "$clients" "${processes:-1}"
  total=$m_requests watches=$m_watches rate=$m_rate cpu=$m_cpu
  measure 0 "$kind" "$tenants" "$clients" "${processes:-1}"
  overhead=$m_requests watch_overhead=$m_watches
  awk -v row="$row" -v t="$total" -v o="$overhead" -v w="$watches" -v wo="$watch_overhead" \
    -v r="$rate" -v s="$seconds" -v c="$cpu" \
    'BEGIN { pops = r * s; per_pop = pops > 0 ? (t - o) / pops : 0
             watch_per_pop = pops > 0 ? (w - wo) / pops : 0
             printf "%-39s %12.2f %11.2f %10.0f %12.0f\n", row, per_pop, watch_per_pop, r, c }'
done
