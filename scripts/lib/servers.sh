# Sourced by the benchmark scripts, after scripts/lib/work_dir.sh: servers of our own on loopback
# ports picked at random. Another server (another session's) may hold such a port, or take it
# between the pick and our server's start; a health check would then pass against that server.
# So a server counts as up only when the process this script started is alive and holds the
# listening socket of its port itself; if it exited because its port was taken, the caller starts
# it again on other ports.

# random_port: a port in 20000-39999 on which nothing accepts connections now.
random_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 20000))
    port_free "$port" && { echo "$port"; return 0; }
  done
}
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# listens PID PORT: process PID holds a listening TCP socket on PORT (from /proc, as root sees any
# process's; a user, their own).
listens() {
  local pid=$1 hex inode fds
  hex=$(printf '%04X' "$2")
  fds=$(ls -l "/proc/$pid/fd" 2>/dev/null) || return 1
  while read -r inode; do
    grep -qF "socket:[$inode]" <<<"$fds" && return 0
  done < <(cat "/proc/$pid/net/tcp" "/proc/$pid/net/tcp6" 2>/dev/null |
           awk -v h=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == h { print $10 }')
  return 1
}

# wait_for_servers SECONDS WHAT CHECK...: polls every 0.2 s until CHECK succeeds and every server
# in $servers (words PID:PORT:LOG, PID started by this script, PORT one it must listen on itself,
# LOG its log) is alive and listening; returns 0 then. Returns 1 if one of them exited because its
# port was taken ("address already in use" in its log): the caller stops the others (stop_pids)
# and starts them again on other ports. Exits the script, with the tail of the logs, if one exited
# for another reason or SECONDS passed.
wait_for_servers() {
  local seconds=$1 what=$2 server pid port log up
  shift 2
  for _ in $(seq $((seconds * 5))); do
    up=1
    for server in $servers; do
      IFS=: read -r pid port log <<<"$server"
      if ! kill -0 "$pid" 2>/dev/null; then
        if grep -qi 'address already in use' "$log" 2>/dev/null; then
          echo "$(basename "$0"): $what: a port was taken ($log: address already in use);" \
            "trying other ports" >&2
          return 1
        fi
        echo "$(basename "$0"): $what: our server (pid $pid) exited; $log:" >&2
        tail -15 "$log" >&2
        exit 1
      fi
      listens "$pid" "$port" || up=0
    done
    [ "$up" -eq 1 ] && "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "$(basename "$0"): $what did not start within $seconds s; logs:" >&2
  for server in $servers; do
    IFS=: read -r pid port log <<<"$server"
    echo "--- $log (pid $pid, port $port)" >&2
    tail -5 "$log" >&2
  done
  exit 1
}

# start_servers SECONDS WHAT START: runs the caller's function START (picks ports, starts the
# servers, appends their pids to $pids, sets $servers and the array $server_check, a command that
# succeeds once they serve) and waits up to SECONDS until they are up (wait_for_servers); when a
# port was taken, stops them and calls START again (new ports), at most 5 times in all.
start_servers() {
  local seconds=$1 what=$2 start=$3 try server started
  for ((try = 1; try <= 5; try++)); do
    "$start"
    wait_for_servers "$seconds" "$what" "${server_check[@]}" && return 0
    started=()
    for server in $servers; do started+=("${server%%:*}"); done
    stop_pids "${started[@]}"
  done
  echo "$(basename "$0"): $what: a port was taken 5 times; giving up" >&2
  exit 1
}
