# Sourced by the benchmark scripts, after scripts/lib/work_dir.sh (make_work_dir sets $work):
# `start_etcd_cluster MEMBERS [etcd flags...]` starts a MEMBERS-member etcd (Debian's etcd-server)
# on loopback ports from a random base, with data directories and logs in $work, its pids added to
# $pids (stopped when the script exits), waits until it is healthy and sets $etcd_endpoints
# ("127.0.0.1:port,..."). Exits the script if it is not healthy within 20 s.
start_etcd_cluster() {
  local members=$1 base=$((20000 + RANDOM % 20000)) cluster="" i
  shift
  for ((i = 0; i < members; i++)); do
    cluster+="${cluster:+,}m$i=http://127.0.0.1:$((base + 10 + i))"
  done
  etcd_endpoints=""
  for ((i = 0; i < members; i++)); do
    local client=$((base + i)) peer=$((base + 10 + i))
    etcd --name "m$i" --data-dir "$work/etcd-m$i" \
      --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
      --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "$cluster" --initial-cluster-token kvq-bench --initial-cluster-state new \
      "$@" >"$work/etcd-m$i.log" 2>&1 &
    pids+=($!)
    etcd_endpoints+="${etcd_endpoints:+,}127.0.0.1:$client"
  done
  for _ in $(seq 100); do
    ETCDCTL_API=3 etcdctl --endpoints "$etcd_endpoints" endpoint health >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "$(basename "$0"): the $members-member etcd did not become healthy; logs: $work/etcd-m*.log" >&2
  tail -5 "$work"/etcd-m*.log >&2
  exit 1
}
