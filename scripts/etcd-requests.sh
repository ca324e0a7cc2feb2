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
cd "$(dirname "$0")/.."
seconds=2
build=build
usage='usage: scripts/etcd-requests.sh [--seconds S] [--build DIR] "KIND TENANTS CLIENTS [PROCESSES]"...'
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -*) echo "$usage" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
[ -x "$build/bench/fair_bench" ] || { echo "no $build/bench/fair_bench: build first" >&2; exit 2; }

source scripts/lib/work_dir.sh
source scripts/lib/etcd.sh
make_work_dir etcd-requests
start_etcd_cluster 1 --unsafe-no-fsync
url="etcd://$etcd_endpoints"

# Range and Txn requests the member has answered so far, and Watch streams it has opened (kvq
# opens one per watch armed), both from HTTP GET /metrics over bash's /dev/tcp: "requests watches".
requests() {
  local host=${etcd_endpoints%:*} port=${etcd_endpoints##*:}
  exec 3<>"/dev/tcp/$host/$port"
  printf 'GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n' "$etcd_endpoints" >&3
  awk '/^grpc_server_handled_total\{/ && /grpc_method="(Range|Txn)"/ { n += $NF }
       /^grpc_server_started_total\{/ && /grpc_method="Watch"/ { w += $NF }
       END { printf "%d %d\n", n, w }' <&3
  exec 3<&-
}

# Runs one fair_bench row for $1 seconds; prints "requests watches pops/s cpu_us/pop".
measure() {
  local s=$1 before after line
  shift
  read -r -a before <<<"$(requests)"
  line=$("$build/bench/fair_bench" "$s" "$url" "$@" | tail -1)
  read -r -a after <<<"$(requests)"
  echo "$((after[0] - before[0])) $((after[1] - before[1])) $(echo "$line" | awk '{ print $4, $6 }')"
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $seconds s per row; 1-member etcd"
printf '%-39s %12s %11s %10s %12s\n' "row (kind tenants clients [processes])" "requests/pop" \
  "watches/pop" "pops/s" "cpu_us/pop"
for row in "$@"; do
  read -r kind tenants clients processes <<<"$row"
  read -r total watches rate cpu <<<"$(measure "$seconds" "$kind" "$tenants" "$clients" \
    "${processes:-1}")"
  read -r overhead watch_overhead _ _ <<<"$(measure 0 "$kind" "$tenants" "$clients" \
    "${processes:-1}")"
  awk -v row="$row" -v t="$total" -v o="$overhead" -v w="$watches" -v wo="$watch_overhead" \
    -v r="$rate" -v s="$seconds" -v c="$cpu" \
    'BEGIN { pops = r * s; per_pop = pops > 0 ? (t - o) / pops : 0
             watch_per_pop = pops > 0 ? (w - wo) / pops : 0
             printf "%-39s %12.2f %11.2f %10.0f %12.0f\n", row, per_pop, watch_per_pop, r, c }'
done
