# Sourced by the benchmark scripts: `make_work_dir NAME` creates a temporary directory ($work) and
# registers it, with every server pid the script appends to $pids, to be killed and removed when
# the script exits, however it exits. Functions named in $cleanup_steps run first (a server
# stopped by its own tool, e.g. PostgreSQL's pg_ctl).
pids=()
cleanup_steps=()
cleanup() {
  local step pid
  for step in "${cleanup_steps[@]}"; do "$step" || true; done
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "${work:-}"
}
make_work_dir() {
  work=$(mktemp -d "/tmp/kvq-$1.XXXXXX")
  trap cleanup EXIT
}
# stop_pids PID...: stops servers this script started (kills them, waits for them) and drops them
# from $pids, as a server is started again elsewhere (scripts/lib/servers.sh).
stop_pids() {
  local pid kept=() stopped
  for pid in "$@"; do kill "$pid" 2>/dev/null || true; done
  for pid in "$@"; do wait "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for stopped in "$@"; do [ "$pid" = "$stopped" ] && continue 2; done
    kept+=("$pid")
  done
  pids=("${kept[@]}")
}
