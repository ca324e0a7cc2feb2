# Sourced by the benchmark scripts, after scripts/lib/work_dir.sh (make_work_dir sets $work) and
# scripts/lib/servers.sh: `start_etcd_cluster MEMBERS [etcd flags...]` starts a MEMBERS-member
# etcd (Debian's etcd-server) on loopback ports from a random base, with data directories and logs
# in $work, its pids added to $pids (stopped when the script exits), waits until it is healthy and
# sets $etcd_endpoints ("127.0.0.1:port,..."). The members must be the processes started here, each
# listening on its ports itself; if a port is taken, the cluster starts again on other ports (a
# few times). Exits the script if it is not healthy within 20 s, or a member exits.
start_etcd_cluster() {
  etcd_members=$1
  shift
  etcd_flags=("$@")
  start_servers 20 "the $etcd_members-member etcd" start_etcd_members
}
# A base port whose 2 x MEMBERS ports (clients from base, peers from base + 10) are free now.
etcd_base_port() {
  local base i
  while :; do
    base=$((20000 + RANDOM % 20000))
    for ((i = 0; i < $1; i++)); do
      if ! port_free $((base + i)) || ! port_free $((base + 10 + i)); then continue 2; fi
    done
    echo "$base"
    return 0
  done
}
start_etcd_members() {
  local members=$etcd_members base cluster="" i client peer
  base=$(etcd_base_port "$members")
  for ((i = 0; i < members; i++)); do
    cluster+="${cluster:+,}m$i=http://127.0.0.1:$((base + 10 + i))"
  done
  etcd_endpoints=""
  servers=""
  for ((i = 0; i < members; i++)); do
    client=$((base + i)) peer=$((base + 10 + i))
    rm -rf "$work/etcd-m$i"
    etcd --name "m$i" --data-dir "$work/etcd-m$i" \
      --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
      --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "$cluster" --initial-cluster-token kvq-bench --initial-cluster-state new \
      "${etcd_flags[@]}" >"$work/etcd-m$i.log" 2>&1 &
    pids+=($!)
    servers+=" $!:$client:$work/etcd-m$i.log $!:$peer:$work/etcd-m$i.log"
    etcd_endpoints+="${etcd_endpoints:+,}127.0.0.1:$client"
  done
  server_check=(env ETCDCTL_API=3 etcdctl --endpoints "$etcd_endpoints" endpoint health)
}
