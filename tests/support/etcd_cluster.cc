#include "support/etcd_cluster.h"

#if defined(__SANITIZE_THREAD__) && defined(KVQ_SOURCE_DIR)
// Test binaries that talk to etcd link this file: give ThreadSanitizer the suppressions for the
// uninstrumented gRPC / protobuf / abseil libraries (tests/tsan.supp says why). TSAN_OPTIONS
// set by the user still apply on top.
extern "C" const char* __tsan_default_options() {
  return "suppressions=" KVQ_SOURCE_DIR "/tests/tsan.supp";
}
#endif

#ifdef KVQ_WITH_ETCD

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "engine/etcd/etcd_engine.h"
#include "support/subprocess.h"

namespace kvq::testing {
namespace {

std::string etcd_binary() {
  if (const char* env = std::getenv("ETCD_BIN"); env != nullptr && *env != '\0') return env;
  if (access("/usr/bin/etcd", X_OK) == 0) return "/usr/bin/etcd";
  if (const char* path = std::getenv("PATH")) {
    std::string p(path);
    std::size_t start = 0;
    while (start <= p.size()) {
      std::size_t end = p.find(':', start);
      std::string dir = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
      std::string candidate = dir + "/etcd";
      if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  return "";
}

// `n` distinct free loopback ports (all bound at once so they differ), never 2379/2380.
std::vector<int> free_ports(int n) {
  std::vector<int> fds;
  std::vector<int> ports;
  while (static_cast<int>(ports.size()) < n) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::runtime_error("etcd_cluster: socket() failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      throw std::runtime_error("etcd_cluster: bind() failed");
    }
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    fds.push_back(fd);
    int port = ntohs(addr.sin_port);
    if (port == 2379 || port == 2380) continue;
    ports.push_back(port);
  }
  for (int fd : fds) close(fd);
  return ports;
}

// The contents of `path`; throws std::runtime_error if it cannot be read.
std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("etcd_cluster: cannot read " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// How the helper reaches members with `tls` (Status needs no authentication).
engine::etcd::EtcdSecurity probe_security(const std::optional<EtcdClusterTls>& tls) {
  engine::etcd::EtcdSecurity security;
  if (!tls) return security;
  security.tls = true;
  security.ca_pem = read_text(tls->ca_file);
  if (tls->client_cert_auth) {
    security.cert_pem = read_text(tls->client_cert_file);
    security.key_pem = read_text(tls->client_key_file);
  }
  return security;
}

}  // namespace

void report_missing_etcd(const std::string& why) {
  const char* required = std::getenv("KVQ_REQUIRE_ETCD");
  if (required == nullptr || std::string_view(required) != "1") return;
  std::fprintf(stderr, "etcd is required (KVQ_REQUIRE_ETCD=1) but %s\n", why.c_str());
  std::fflush(stderr);
  std::_Exit(1);  // (not gtest: the benchmarks link this file too)
}

bool EtcdCluster::available() {
  if (!etcd_binary().empty()) return true;
  report_missing_etcd("no etcd binary was found (install etcd-server)");
  return false;
}

EtcdCluster::EtcdCluster(int members, std::vector<std::string> extra_flags,
                         std::optional<EtcdClusterTls> tls)
    : extra_flags_(std::move(extra_flags)), tls_(std::move(tls)) {
  if (members < 1) throw std::invalid_argument("etcd_cluster: need at least one member");
  if (!available()) throw std::runtime_error("etcd_cluster: no etcd binary (install etcd-server)");
  std::string templ = (std::filesystem::temp_directory_path() / "kvq-etcd-XXXXXX").string();
  if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("etcd_cluster: mkdtemp failed");
  root_ = templ;
  std::vector<int> ports = free_ports(2 * members);
  for (int i = 0; i < members; ++i) {
    Member m;
    m.name = "m" + std::to_string(i);
    m.client_port = ports[2 * i];
    m.peer_port = ports[2 * i + 1];
    m.data_dir = root_ + "/" + m.name;
    members_.push_back(m);
  }
  try {
    for (int i = 0; i < members; ++i) spawn(i, /*initial=*/true);
    wait_healthy(std::chrono::seconds(30));
  } catch (...) {
    for (int i = 0; i < size(); ++i) {
      if (running(i)) kill(i);
    }
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
    throw;
  }
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < size(); ++i) {
    if (running(i)) kill(i);
  }
  std::error_code ec;
  std::filesystem::remove_all(root_, ec);
}

std::string EtcdCluster::endpoint(int i) const {
  return "127.0.0.1:" + std::to_string(members_[i].client_port);
}

std::string EtcdCluster::url(const std::string& query, const std::string& userinfo) const {
  std::string out = tls_ ? "etcds://" : "etcd://";
  if (!userinfo.empty()) out += userinfo + "@";
  for (int i = 0; i < size(); ++i) out += (i ? "," : "") + endpoint(i);
  if (!query.empty()) out += "?" + query;
  return out;
}

std::string EtcdCluster::initial_cluster() const {
  std::string out;
  for (const Member& m : members_) {
    if (!out.empty()) out += ",";
    out += m.name + "=http://127.0.0.1:" + std::to_string(m.peer_port);
  }
  return out;
}

std::string EtcdCluster::client_url(int i) const {
  return (tls_ ? "https://" : "http://") + endpoint(i);
}

bool EtcdCluster::answers(int i, std::chrono::milliseconds timeout) const {
  return engine::etcd::probe_member(endpoint(i), timeout, probe_security(tls_)).has_value();
}

int EtcdCluster::etcdctl(const std::vector<std::string>& args, std::string* output) const {
  const std::string bin = "/usr/bin/etcdctl";
  if (access(bin.c_str(), X_OK) != 0) throw std::runtime_error("no etcdctl (install etcd-client)");
  std::string endpoints;
  for (int i = 0; i < size(); ++i) endpoints += (i ? "," : "") + client_url(i);
  std::vector<std::string> argv = {"/usr/bin/env", "ETCDCTL_API=3", bin, "--endpoints=" + endpoints,
                                   "--dial-timeout=5s"};
  if (tls_) {
    argv.push_back("--cacert=" + tls_->ca_file);
    if (tls_->client_cert_auth) {
      argv.push_back("--cert=" + tls_->client_cert_file);
      argv.push_back("--key=" + tls_->client_key_file);
    }
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program(argv, output);
}

void EtcdCluster::spawn(int i, bool initial) {
  Member& m = members_[i];
  const std::string client = client_url(i);
  const std::string peer = "http://127.0.0.1:" + std::to_string(m.peer_port);
  std::vector<std::string> args = {
      etcd_binary(),
      "--name=" + m.name,
      "--data-dir=" + m.data_dir,
      "--listen-client-urls=" + client,
      "--advertise-client-urls=" + client,
      "--listen-peer-urls=" + peer,
      "--initial-advertise-peer-urls=" + peer,
      "--initial-cluster=" + initial_cluster(),
      "--initial-cluster-state=" + std::string(initial ? "new" : "existing"),
      "--initial-cluster-token=" + root_,
      "--unsafe-no-fsync",
      "--heartbeat-interval=50",
      "--election-timeout=500",
      "--log-level=warn",
      "--logger=zap"};
  if (tls_) {
    args.push_back("--cert-file=" + tls_->cert_file);
    args.push_back("--key-file=" + tls_->key_file);
    // etcd 3.4 requires client certificates as soon as it has --trusted-ca-file.
    if (tls_->client_cert_auth) {
      args.push_back("--trusted-ca-file=" + tls_->ca_file);
      args.push_back("--client-cert-auth");
    }
  }
  for (const std::string& f : extra_flags_) args.push_back(f);
  const std::string log = root_ + "/" + m.name + ".log";
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("etcd_cluster: fork failed");
  if (pid == 0) {
    // Child: die with the test process (no orphaned etcd), log to a file, exec etcd.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  m.pid = pid;
}

void EtcdCluster::kill(int i) {
  Member& m = members_[i];
  if (m.pid <= 0) return;
  ::kill(m.pid, SIGKILL);
  int status = 0;
  waitpid(m.pid, &status, 0);
  m.pid = 0;
}

void EtcdCluster::pause(int i) {
  if (members_[i].pid > 0) ::kill(members_[i].pid, SIGSTOP);
}

void EtcdCluster::resume(int i) {
  if (members_[i].pid > 0) ::kill(members_[i].pid, SIGCONT);
}

void EtcdCluster::restart(int i, std::chrono::milliseconds timeout) {
  if (running(i)) throw std::logic_error("etcd_cluster: member is running");
  spawn(i, /*initial=*/false);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (answers(i, std::chrono::milliseconds(500))) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("etcd_cluster: member " + members_[i].name + " did not come back");
}

int EtcdCluster::leader(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  do {
    std::map<std::uint64_t, int> index_of;
    std::optional<std::uint64_t> agreed;
    bool ok = true;
    for (int i = 0; i < size() && ok; ++i) {
      if (!running(i)) continue;
      auto st = engine::etcd::probe_member(endpoint(i), std::chrono::milliseconds(500),
                                           probe_security(tls_));
      if (!st || st->leader_id == 0) {
        ok = false;
        break;
      }
      index_of[st->member_id] = i;
      if (agreed && *agreed != st->leader_id) ok = false;
      agreed = st->leader_id;
    }
    if (ok && agreed) {
      auto it = index_of.find(*agreed);
      if (it != index_of.end()) return it->second;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < deadline);
  return -1;
}

void EtcdCluster::wait_healthy(std::chrono::milliseconds timeout) const {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < size(); ++i) {
    if (!running(i)) continue;
    while (!answers(i, std::chrono::milliseconds(500))) {
      int status = 0;
      if (waitpid(members_[i].pid, &status, WNOHANG) == members_[i].pid) {
        throw std::runtime_error("etcd_cluster: etcd exited at start; see " + root_ + "/" +
                                 members_[i].name + ".log");
      }
      if (std::chrono::steady_clock::now() - start > timeout) {
        throw std::runtime_error("etcd_cluster: member " + members_[i].name + " not healthy");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  auto left = timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - start);
  if (leader(std::max(left, std::chrono::milliseconds(1000))) < 0) {
    throw std::runtime_error("etcd_cluster: no leader elected");
  }
}

EtcdCluster* shared_etcd_cluster(std::string* why) {
  static std::mutex mu;
  static std::unique_ptr<EtcdCluster> cluster;
  static std::string failure;
  std::lock_guard lock(mu);
  if (!cluster && failure.empty()) {
    try {
      cluster = std::make_unique<EtcdCluster>(1);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  if (!cluster) report_missing_etcd("the shared test etcd did not start: " + failure);
  if (!cluster && why != nullptr) *why = failure;
  return cluster.get();
}

std::string fresh_shared_etcd_url(const std::string& query, std::string* why) {
  EtcdCluster* cluster = shared_etcd_cluster(why);
  if (cluster == nullptr) return "";
  static std::atomic<int> counter{0};
  std::string q = "prefix=kvqtest-" + std::to_string(getpid()) + "-" +
                  std::to_string(counter.fetch_add(1)) + "/";
  if (!query.empty()) q += "&" + query;
  return cluster->url(q);
}

}  // namespace kvq::testing

#else  // !KVQ_WITH_ETCD

namespace kvq::testing {

bool EtcdCluster::available() { return false; }

EtcdCluster* shared_etcd_cluster(std::string* why) {
  if (why != nullptr) *why = "built without KVQ_WITH_ETCD";
  return nullptr;
}

std::string fresh_shared_etcd_url(const std::string&, std::string* why) {
  if (why != nullptr) *why = "built without KVQ_WITH_ETCD";
  return "";
}

}  // namespace kvq::testing

#endif  // KVQ_WITH_ETCD
