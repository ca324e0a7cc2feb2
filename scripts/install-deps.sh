#!/usr/bin/env bash
# Installs everything kvq needs to build and test, from Debian bookworm packages only, plus any
# further packages named as arguments (scripts/bench-peers.sh names Redis and PostgreSQL).
# Idempotent: packages already present are skipped quickly. Run as root (or with sudo available).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git lld
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  librocksdb-dev libjemalloc-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libcli11-dev nlohmann-json3-dev gnuplot-nox
  clang-format clang-tidy clang libclang-rt-14-dev
  etcd-server etcd-client openssl  # openssl: the TLS test certificates (tests/etcd_security_test.cc)
  "$@"
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Debian's etcd-server starts a system etcd on port 2379; kvq's tests never use it, and we stop it so
# nothing listens on the default port by accident.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet etcd 2>/dev/null; then
  systemctl stop etcd || true
fi
