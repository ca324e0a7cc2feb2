// etcd security (issue 14 item 3): etcds:// (TLS, ca_file=, cert_file= / key_file=) and
// user/password authentication (user:password@, user=, password_file=), against real etcd
// members started with TLS (certificates made with openssl in the test) and with auth enabled by
// etcdctl. Covers: queues over TLS with auth; a token that expires (--auth-token-ttl=2) and one
// lost in a restart, renewed transparently (commits and watches); one clear error, quickly and
// without a storm of retries, for a wrong password, an untrusted server certificate, a plain-text
// server behind etcds:// and a TLS server behind etcd://; malformed options refused before any
// connection; the password never in an error message or Database::url().
#ifdef KVQ_WITH_ETCD
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/url.h"
#include "engine/etcd/etcd_engine.h"
#include "engine/etcd/etcd_options.h"
#include "engine/watch_state.h"
#include "kvq/kvq.h"
#include "support/etcd_cluster.h"
#include "support/figures.h"
#include "support/temp_dir.h"
#include "support/test_pki.h"

namespace kvq {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using engine::etcd::parse_etcd_url;
using testing::EtcdCluster;
using testing::EtcdClusterTls;
using testing::TempDir;
using testing::TestPki;

constexpr const char* kPassword = "s3cret-Pw";

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The error kvq::open(url) throws (fails the test if it opens).
Error open_error(const std::string& url, std::chrono::milliseconds* took = nullptr) {
  testing::record_figure(testing::kUrlsRefused, 1);
  const auto start = Clock::now();
  try {
    kvq::open(url);
  } catch (const Error& e) {
    if (took != nullptr) {
      *took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    }
    return e;
  }
  ADD_FAILURE() << "opened " << url;
  return Error(ErrorCode::kUnknownError, "opened");
}

// TLS on a test member with `pki`'s server certificate.
EtcdClusterTls server_tls(const TestPki& pki) {
  EtcdClusterTls tls;
  tls.cert_file = pki.server_cert;
  tls.key_file = pki.server_key;
  tls.ca_file = pki.ca;
  return tls;
}

// True if the live tests can run: etcd, and /usr/bin/openssl for their certificates. A missing
// openssl, like a missing etcd, ends the test binary with a failure under KVQ_REQUIRE_ETCD=1
// (support/etcd_cluster.h, report_missing_etcd); otherwise the live tests skip.
bool live_tests_possible() {
  if (!EtcdCluster::available()) return false;
  if (testing::openssl_available()) return true;
  testing::report_missing_etcd(
      "no /usr/bin/openssl to make the TLS test certificates (install openssl: "
      "scripts/install-deps.sh)");
  return false;
}

std::uint64_t authentications(const Database& db) {
  auto* etcd = dynamic_cast<engine::etcd::EtcdEngine*>(db.engine().get());
  return etcd == nullptr ? 0 : etcd->authentications();
}

// ---------------------------------------------------------------------------------------------
// URLs: parsed and checked before anything connects.

class SecurityUrlTest : public ::testing::Test {
 protected:
  SecurityUrlTest() {
    write_file(pem_, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
    write_file(not_pem_, "hello\n");
    write_file(password_file_, std::string(kPassword) + "\n");
    write_file(empty_, "");
  }

  TempDir dir_{"etcd-security-url"};
  const std::string pem_ = dir_.file("a.pem");
  const std::string not_pem_ = dir_.file("not.pem");
  const std::string password_file_ = dir_.file("password");
  const std::string empty_ = dir_.file("empty");
  const std::string missing_ = dir_.file("missing.pem");
};

TEST_F(SecurityUrlTest, ParsesTlsFilesAndPercentDecodedUserInfo) {
  const engine::etcd::EtcdOptions o = parse_etcd_url(
      "etcds://ro%40t:p%3Ass%25w%2F@127.0.0.1:2379,127.0.0.1:2380?prefix=a/&ca_file=" + pem_ +
      "&cert_file=" + pem_ + "&key_file=" + pem_);
  EXPECT_TRUE(o.security.tls);
  EXPECT_EQ(o.security.user, "ro@t");
  EXPECT_EQ(o.security.password, "p:ss%w/");
  ASSERT_EQ(o.endpoints.size(), 2u);
  EXPECT_EQ(o.endpoints[1], "127.0.0.1:2380");
  EXPECT_EQ(o.security.ca_file, pem_);
  EXPECT_NE(o.security.ca_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_FALSE(o.security.cert_pem.empty());
  EXPECT_FALSE(o.security.key_pem.empty());
  EXPECT_EQ(o.prefix, "a/");
}

TEST_F(SecurityUrlTest, PasswordFileAndUserOption) {
  const engine::etcd::EtcdOptions o =
      parse_etcd_url("etcds://127.0.0.1:2379?user=root&password_file=" + password_file_);
  EXPECT_EQ(o.security.user, "root");
  EXPECT_EQ(o.security.password, kPassword);  // the file's line end is not part of it
  EXPECT_TRUE(o.security.ca_pem.empty());     // gRPC's default roots
  const engine::etcd::EtcdOptions plain = parse_etcd_url("etcd://127.0.0.1:2379");
  EXPECT_FALSE(plain.security.tls);
  EXPECT_FALSE(plain.security.authenticates());
  const engine::etcd::EtcdOptions opt_in =
      parse_etcd_url("etcd://root:pw@127.0.0.1:2379?plaintext_auth=1");
  EXPECT_EQ(opt_in.security.password, "pw");
  // mvcc_window_ms=0 is the default written out: no compaction.
  EXPECT_EQ(parse_etcd_url("etcd://127.0.0.1:2379?mvcc_window_ms=0").mvcc_window.count(), 0);
  EXPECT_THROW(parse_etcd_url("etcd://127.0.0.1:2379?mvcc_window_ms=-1"), Error);
}

TEST_F(SecurityUrlTest, MalformedSecurityOptionsAreInvalidBeforeConnecting) {
  const std::string pw = kPassword;
  const std::vector<std::string> urls = {
      "etcds://127.0.0.1:1?key_file=" + pem_,                        // key without cert
      "etcds://127.0.0.1:1?cert_file=" + pem_,                       // cert without key
      "etcds://root:" + pw + "@127.0.0.1:1?ca_file=" + missing_,     // unreadable
      "etcds://root:" + pw + "@127.0.0.1:1?ca_file=" + dir_.path(),  // a directory
      "etcds://root:" + pw + "@127.0.0.1:1?ca_file=" + not_pem_,     // not PEM
      "etcds://root:" + pw + "@127.0.0.1:1?cert_file=" + pem_ + "&key_file=" + empty_,
      "etcds://127.0.0.1:1?user=root&password_file=" + missing_,              // unreadable
      "etcds://127.0.0.1:1?user=root&password_file=" + empty_,                // empty
      "etcds://root@127.0.0.1:1",                                             // no password
      "etcds://:" + pw + "@127.0.0.1:1",                                      // no user
      "etcds://127.0.0.1:1?password_file=" + password_file_,                  // no user
      "etcds://root:" + pw + "@127.0.0.1:1?password_file=" + password_file_,  // two passwords
      "etcds://root:" + pw + "@127.0.0.1:1?user=admin",                       // two users
      "etcd://root:" + pw + "@127.0.0.1:1",                                   // clear text
      "etcd://127.0.0.1:1?ca_file=" + pem_,                                   // TLS option, no TLS
      "etcds://root:" + pw + "%zz@127.0.0.1:1",                               // bad escape
      "etcds://root:" + pw + "%4@127.0.0.1:1",                                // truncated escape
      "etcd://root:" + pw + "@127.0.0.1:1?plaintext_auth=yes",
      "etcds://root:" + pw + "@127.0.0.1:1?ca_file=",  // empty value
      "etcds:root:" + pw + "@127.0.0.1:1",             // no "//"
      "etcds:/root:" + pw + "@127.0.0.1:1",            // one '/'
      "etcds//root:" + pw + "@127.0.0.1:1",            // no ':'
      "etcds://root:" + pw + "?x=1@127.0.0.1:1",       // an unencoded '?' in the password
      "etcds://root:" + pw + "?@127.0.0.1:1",          // the same, ending it
  };
  for (const std::string& url : urls) {
    SCOPED_TRACE(url);
    std::chrono::milliseconds took{0};
    const Error e = open_error(url, &took);
    EXPECT_EQ(e.code(), ErrorCode::kConnectionStringInvalid) << e.what();
    EXPECT_EQ(std::string(e.what()).find(pw), std::string::npos) << e.what();
    EXPECT_LT(took, 500ms);  // nothing was contacted (port 1 has no etcd)
  }
}

TEST_F(SecurityUrlTest, RedactUrlAndPercentDecode) {
  EXPECT_EQ(detail::redact_url("etcds://root:pw@h:1,h:2?x=1"), "etcds://root:***@h:1,h:2?x=1");
  EXPECT_EQ(detail::redact_url("etcds://a:b@c@h:1"), "etcds://a:***@h:1");
  EXPECT_EQ(detail::redact_url("etcds://root@h:1"), "etcds://root@h:1");
  EXPECT_EQ(detail::redact_url("etcd://h:1?prefix=a@b"), "etcd://h:1?prefix=a@b");
  EXPECT_EQ(detail::redact_url("memory:"), "memory:");
  EXPECT_EQ(detail::redact_url("etcds:root:pw@h:1"), "etcds:root:***@h:1");  // missing "//"
  EXPECT_EQ(detail::redact_url("etcds//root:pw@h:1"), "etcds//root:***@h:1");
  // In an error message, an '@' after the '?' may end a password holding a '?'.
  EXPECT_EQ(detail::redact_url_for_error("etcds://root:p?w=1@h:1"), "etcds://root:***@h:1");
  EXPECT_EQ(detail::redact_url_for_error("etcds://root:pw@h:1?x=1"), "etcds://root:***@h:1?x=1");
  EXPECT_EQ(detail::redact_url_for_error("etcd://h:1?x=1"), "etcd://h:1?x=1");
  EXPECT_EQ(detail::percent_decode("a%40b%2f%2F+"), std::optional<std::string>("a@b//+"));
  EXPECT_EQ(detail::percent_decode("%"), std::nullopt);
  EXPECT_EQ(detail::percent_decode("%a"), std::nullopt);
  EXPECT_EQ(detail::percent_decode("%g0"), std::nullopt);
}

// ---------------------------------------------------------------------------------------------
// A TCP listener that accepts and closes connections, counting them: a server that is not etcd
// (for "no retry storm").

class CountingListener {
 public:
  CountingListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(fd_, 64) != 0 || getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("CountingListener: cannot listen");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        const int c = accept(fd_, nullptr, nullptr);
        if (c < 0 || stop_) break;
        ++accepted_;
        close(c);
      }
    });
  }
  ~CountingListener() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  int accepted() const { return accepted_.load(); }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------------
// Live: one etcd with TLS and auth (root, password kPassword; simple tokens live 2 s).

class EtcdSecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!live_tests_possible()) return;
    dir_ = new TempDir("etcd-security");
    pki_ = new TestPki(testing::make_test_pki(dir_->path()));
    write_file(dir_->file("password"), std::string(kPassword) + "\n");
    cluster_ = new EtcdCluster(1, {"--auth-token-ttl=2"}, server_tls(*pki_));
    // Named steps: root, a user "app" with read-write on keys under "app/", then auth on.
    const std::vector<std::vector<std::string>> commands = {
        {"user", "add", "root:" + std::string(kPassword), "--interactive=false"},
        {"role", "add", "app"},
        {"role", "grant-permission", "app", "readwrite", "app/", "--prefix=true"},
        {"user", "add", "app:app-Pw", "--interactive=false"},
        {"user", "grant-role", "app", "app"},
        {"auth", "enable"}};
    for (const std::vector<std::string>& command : commands) {
      std::string out;
      if (cluster_->etcdctl(command, &out) != 0) {
        failure_ = "etcdctl " + command[0] + " " + command[1] + " failed: " + out;
        return;
      }
    }
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete pki_;
    delete dir_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (cluster_ == nullptr) GTEST_SKIP() << "etcd or openssl not installed";
    ASSERT_TRUE(failure_.empty()) << failure_;
  }

  // etcds://root:<password>@<member>?prefix=<fresh>&ca_file=<ca>[&extra].
  static std::string url(const std::string& extra = "",
                         const std::string& userinfo = "root:" + std::string(kPassword)) {
    static std::atomic<int> n{0};
    std::string q = "prefix=sec" + std::to_string(n++) + "/&ca_file=" + pki_->ca;
    if (!extra.empty()) q += "&" + extra;
    return cluster_->url(q, userinfo);
  }

  static inline TempDir* dir_ = nullptr;
  static inline TestPki* pki_ = nullptr;
  static inline EtcdCluster* cluster_ = nullptr;
  static inline std::string failure_;
};

Subspace queue_space() { return Subspace(Tuple().append("q")); }

TEST_F(EtcdSecurityTest, QueueOverTlsWithAuthentication) {
  auto db = kvq::open(url());
  EXPECT_EQ(db->url().find(kPassword), std::string::npos) << db->url();
  EXPECT_NE(db->url().find("root:***@"), std::string::npos) << db->url();
  Queue q(db, queue_space());
  q.push("a");
  q.push("b");
  EXPECT_EQ(q.pop(), "a");
  EXPECT_EQ(q.pop(), "b");
  EXPECT_EQ(q.pop(), std::nullopt);
  EXPECT_EQ(authentications(*db), 1u);
}

TEST_F(EtcdSecurityTest, PasswordFileAndUserOption) {
  auto db = kvq::open(url("user=root&password_file=" + dir_->file("password"), ""));
  Queue q(db, queue_space());
  q.push("x");
  EXPECT_EQ(q.pop(), "x");
}

TEST_F(EtcdSecurityTest, ExpiredTokenIsRenewedForCommitsReadsAndWatches) {
  const std::string u = url();
  auto db = kvq::open(u);
  auto other = kvq::open(u);
  Queue q(db, queue_space());
  Queue q2(other, queue_space());
  q.push("before");
  std::this_thread::sleep_for(3500ms);  // past --auth-token-ttl=2 with no call
  q.push("after");                      // a commit with an expired token
  EXPECT_EQ(q.pop(), "before");
  EXPECT_EQ(q.pop(), "after");
  EXPECT_GE(authentications(*db), 2u);
  // A watch stream opened with an expired token (etcd 3.4 cancels its creation with
  // "permission denied"): the engine renews the token and opens it again.
  Version version = 0;
  db->run([&](Transaction& tr) {
    tr.get("wk");
    version = tr.get_read_version();
  });
  std::this_thread::sleep_for(3500ms);
  const std::uint64_t before = authentications(*db);
  auto state = std::make_shared<detail::WatchState>();
  db->engine()->watch("wk", std::nullopt, version, state);
  std::this_thread::sleep_for(500ms);
  other->run([&](Transaction& tr) { tr.set("wk", "1"); });
  EXPECT_TRUE(state->wait_for(10s));
  EXPECT_GT(authentications(*db), before);
}

TEST_F(EtcdSecurityTest, SurvivesEtcdRestart) {
  auto db = kvq::open(url());
  Queue q(db, queue_space());
  q.push("1");
  cluster_->kill(0);
  cluster_->restart(0);
  q.push("2");
  EXPECT_EQ(q.pop(), "1");
  EXPECT_EQ(q.pop(), "2");
}

TEST_F(EtcdSecurityTest, WrongPasswordIsOneQuickAuthenticationError) {
  std::chrono::milliseconds took{0};
  const Error e = open_error(url("", "root:wrong-Pw"), &took);
  EXPECT_EQ(e.code(), ErrorCode::kAuthenticationFailed) << e.what();
  EXPECT_EQ(std::string(e.what()).find("wrong-Pw"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("root"), std::string::npos) << e.what();
  EXPECT_LT(took, 3s);
  const Error unknown_user = open_error(url("", "nobody:pw"));
  EXPECT_EQ(unknown_user.code(), ErrorCode::kAuthenticationFailed) << unknown_user.what();
}

TEST_F(EtcdSecurityTest, NoCredentialsIsAnAuthenticationError) {
  auto db = kvq::open(cluster_->url("prefix=sec-anon/&ca_file=" + pki_->ca));
  try {
    Queue(db, queue_space()).push("x");
    FAIL() << "pushed without credentials";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kAuthenticationFailed) << e.what();
  }
}

TEST_F(EtcdSecurityTest, UserWithoutPermissionOnThePrefix) {
  const std::string ca = "&ca_file=" + pki_->ca;
  auto allowed = kvq::open(cluster_->url("prefix=app/" + ca, "app:app-Pw"));
  Queue q(allowed, queue_space());
  q.push("mine");
  EXPECT_EQ(q.pop(), "mine");
  auto denied = kvq::open(cluster_->url("prefix=other/" + ca, "app:app-Pw"));
  try {
    Queue(denied, queue_space()).push("x");
    FAIL() << "pushed outside the user's prefix";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kPermissionDenied) << e.what();
  }
}

TEST_F(EtcdSecurityTest, UntrustedServerCertificateIsOneQuickConnectionError) {
  for (const std::string& ca : {std::string("&ca_file=") + pki_->other_ca, std::string()}) {
    SCOPED_TRACE(ca.empty() ? "system roots" : "other CA");
    const std::string u = cluster_->url("prefix=x/" + ca, "root:" + std::string(kPassword));
    std::chrono::milliseconds took{0};
    const Error e = open_error(u, &took);
    EXPECT_EQ(e.code(), ErrorCode::kConnectionFailed) << e.what();
    EXPECT_NE(std::string(e.what()).find("TLS handshake failed"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find(kPassword), std::string::npos) << e.what();
    EXPECT_LT(took, 6s);
    std::cout << "untrusted: " << e.what() << "\n";
  }
}

TEST_F(EtcdSecurityTest, TlsServerBehindPlainEtcdUrl) {
  std::string why;
  const std::string u = "etcd://" + cluster_->endpoint(0);
  std::chrono::milliseconds took{0};
  const Error e = open_error(u, &took);
  EXPECT_EQ(e.code(), ErrorCode::kConnectionFailed) << e.what();
  EXPECT_NE(std::string(e.what()).find("etcds://"), std::string::npos) << e.what();
  EXPECT_LT(took, 6s);
}

TEST_F(EtcdSecurityTest, PlainTextServerBehindEtcdsIsOneQuickConnectionError) {
  std::string why;
  EtcdCluster* plain = testing::shared_etcd_cluster(&why);
  ASSERT_NE(plain, nullptr) << why;
  std::chrono::milliseconds took{0};
  const Error e = open_error("etcds://" + plain->endpoint(0) + "?ca_file=" + pki_->ca, &took);
  EXPECT_EQ(e.code(), ErrorCode::kConnectionFailed) << e.what();
  EXPECT_NE(std::string(e.what()).find("etcd://"), std::string::npos) << e.what();
  EXPECT_LT(took, 6s);
  std::cout << "plain-text server behind etcds://: " << e.what() << "\n";
}

TEST_F(EtcdSecurityTest, NoRetryStormAgainstAServerThatIsNotEtcd) {
  CountingListener listener;
  std::chrono::milliseconds took{0};
  const Error e = open_error("etcds://" + listener.endpoint() + "?ca_file=" + pki_->ca, &took);
  EXPECT_EQ(e.code(), ErrorCode::kConnectionFailed) << e.what();
  EXPECT_LT(took, 6s);
  EXPECT_LE(listener.accepted(), 12) << "connections in " << took.count() << " ms";
  std::cout << "connections made: " << listener.accepted() << " in " << took.count() << " ms\n";
}

// ---------------------------------------------------------------------------------------------
// Live: an etcd that requires client certificates (--client-cert-auth), no auth.

TEST(EtcdClientCertificateTest, ClientCertificateIsPresented) {
  if (!live_tests_possible()) GTEST_SKIP();
  TempDir dir("etcd-client-cert");
  const TestPki pki = testing::make_test_pki(dir.path());
  EtcdClusterTls tls = server_tls(pki);
  tls.client_cert_auth = true;
  tls.client_cert_file = pki.client_cert;
  tls.client_key_file = pki.client_key;
  EtcdCluster cluster(1, {}, tls);
  auto db = kvq::open(cluster.url("ca_file=" + pki.ca + "&cert_file=" + pki.client_cert +
                                  "&key_file=" + pki.client_key));
  Queue q(db, queue_space());
  q.push("c");
  EXPECT_EQ(q.pop(), "c");
  std::chrono::milliseconds took{0};
  const Error e = open_error(cluster.url("ca_file=" + pki.ca), &took);
  EXPECT_EQ(e.code(), ErrorCode::kConnectionFailed) << e.what();
  EXPECT_LT(took, 6s);
  std::cout << "no client certificate: " << e.what() << "\n";
}

}  // namespace
}  // namespace kvq

#endif  // KVQ_WITH_ETCD
