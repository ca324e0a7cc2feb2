# Sourced by the benchmark scripts: `make_work_dir NAME` creates a temporary directory ($work) and
# registers it, with every server pid the script appends to $pids, to be killed and removed when
# the script exits, however it exits.
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "${work:-}"
}
make_work_dir() {
  work=$(mktemp -d "/tmp/kvq-$1.XXXXXX")
  trap cleanup EXIT
}
