// Test helper: real etcd processes (1 or 3 members) on free loopback ports, with temporary data
// directories, for tests and benchmarks of the etcd engine. Never uses ports 2379/2380 and never
// touches an etcd it did not start: processes are stopped by their own pid.
//
// Example:
//   kvq::testing::EtcdCluster cluster(3);          // started and healthy, or throws
//   auto db = kvq::open(cluster.url("prefix=t1/"));
//   cluster.kill(cluster.leader());                 // SIGKILL
//   cluster.restart(...);
#ifndef KVQ_TESTS_SUPPORT_ETCD_CLUSTER_H_
#define KVQ_TESTS_SUPPORT_ETCD_CLUSTER_H_

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace kvq::testing {

// TLS on a test cluster's client port (files such as make_test_pki's).
struct EtcdClusterTls {
  std::string cert_file;  // the server's certificate (--cert-file)
  std::string key_file;   // and its key (--key-file)
  std::string ca_file;    // the root the helper trusts when probing
  // --client-cert-auth and --trusted-ca-file=ca_file: clients must present a certificate signed
  // by ca_file (etcd 3.4 requires one whenever it has --trusted-ca-file).
  bool client_cert_auth = false;
  std::string client_cert_file;  // what the helper presents when probing (with client_cert_auth)
  std::string client_key_file;
};

class EtcdCluster {
 public:
  // True if an etcd binary is installed (ETCD_BIN, else /usr/bin/etcd, else etcd on PATH).
  static bool available();

  // Starts `members` etcd processes (1 or 3 typical) forming one cluster and waits until every
  // member answers and a leader is elected. `extra_flags` are passed to every member. Throws
  // std::runtime_error (after stopping what it started) if that takes longer than 30 s.
  // With `tls`, the client port speaks TLS only (peers stay plain text) and url() is etcds://.
  explicit EtcdCluster(int members = 1, std::vector<std::string> extra_flags = {},
                       std::optional<EtcdClusterTls> tls = std::nullopt);
  // SIGKILLs every member still running and removes the data directories.
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  int size() const { return static_cast<int>(members_.size()); }
  // "127.0.0.1:port" of member i.
  std::string endpoint(int i) const;
  // "etcd://ep1,ep2,..." ("etcds://" with TLS), `userinfo` + "@" before the endpoints if not
  // empty, plus "?query" if `query` is not empty.
  std::string url(const std::string& query = "", const std::string& userinfo = "") const;
  // Runs etcdctl (ETCDCTL_API=3) against every member, with the cluster's TLS flags, and the
  // arguments `args` (e.g. {"--user=root:pw", "auth", "enable"}); returns its exit code and its
  // stdout in *output. Throws std::runtime_error if etcdctl is not installed.
  int etcdctl(const std::vector<std::string>& args, std::string* output = nullptr) const;

  // Member i's process id (0 if not running).
  pid_t pid(int i) const { return members_[i].pid; }
  bool running(int i) const { return members_[i].pid > 0; }
  // SIGKILLs member i and reaps it.
  void kill(int i);
  // SIGSTOPs member i (it keeps its sockets but answers nothing) / SIGCONTs it.
  void pause(int i);
  void resume(int i);
  // Restarts a killed member i with its old data directory and waits until it answers.
  void restart(int i, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Index of the member the running members agree is leader; -1 if none within `timeout`.
  int leader(std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  // Waits until every running member answers and agrees on a leader; throws on timeout.
  void wait_healthy(std::chrono::milliseconds timeout) const;

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    std::string data_dir;
    pid_t pid = 0;
  };
  void spawn(int i, bool initial);
  std::string initial_cluster() const;
  // True if member i answers a Status call within `timeout` (over TLS with tls_).
  bool answers(int i, std::chrono::milliseconds timeout) const;
  std::string client_url(int i) const;

  std::string root_;  // temp dir holding the data dirs and logs
  std::vector<Member> members_;
  std::vector<std::string> extra_flags_;
  std::optional<EtcdClusterTls> tls_;
};

// Ends the process with exit status 1, saying `why` on stderr, if the environment sets
// KVQ_REQUIRE_ETCD=1 (tests/CMakeLists.txt does for ctest when etcd is built): an etcd the tests
// cannot find or start is then a failing test binary, not skipped tests that a green run would
// hide. Called by available() and shared_etcd_cluster() when they have no etcd to give.
void report_missing_etcd(const std::string& why);

// A 1-member cluster shared by the whole test process, started on first call and stopped at
// exit; nullptr with `*why` set if etcd is not installed or does not start. Thread-safe.
EtcdCluster* shared_etcd_cluster(std::string* why);

// "etcd://..." on the shared cluster with a key prefix never used before in this process (so the
// database is fresh and empty), plus the options `query` ("a=1&b=2", may be empty). Returns ""
// with `*why` set if there is no cluster. Thread-safe.
std::string fresh_shared_etcd_url(const std::string& query, std::string* why);

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_ETCD_CLUSTER_H_
