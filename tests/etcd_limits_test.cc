// Database::limits() and Transaction::usage() on etcd: a transaction filled up while its usage
// stays within the limits commits; one operation or one value more fails with a clear
// transaction_too_large before anything is sent, and nothing is written. Against etcd's default
// limits and against an etcd started with --max-txn-ops=256 --max-request-bytes=262144 and the
// matching URL options max_txn_ops= and max_request_bytes=. And etcd's space quota: pushes from
// several threads into an etcd that runs out of space (NOSPACE) end in database_full, promptly,
// with nothing lost or written twice once space is freed.
#ifdef KVQ_WITH_ETCD
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <ostream>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/etcd/etcd_options.h"
#include "kvq/kvq.h"
#include "support/etcd_cluster.h"

namespace kvq {
namespace {

using testing::EtcdCluster;

struct Server {
  std::string name;
  std::vector<std::string> flags;  // of the etcd server
  std::string query;               // the matching URL options
  std::size_t max_operations;
  std::size_t request_bytes;
};

void PrintTo(const Server& server, std::ostream* os) { *os << server.name; }

Server default_server() { return {"default", {}, "", 128, 1'572'864}; }
Server raised_server() {
  return {"raised",
          {"--max-txn-ops=256", "--max-request-bytes=262144"},
          "max_txn_ops=256&max_request_bytes=262144",
          256,
          262'144};
}

class EtcdLimitsTest : public ::testing::TestWithParam<Server> {
 protected:
  void SetUp() override {
    if (!EtcdCluster::available()) GTEST_SKIP() << "etcd not installed";
    cluster_ = std::make_unique<EtcdCluster>(1, GetParam().flags);
    std::string query = "prefix=lim/";
    if (!GetParam().query.empty()) query += "&" + GetParam().query;
    db_ = open(cluster_->url(query));
  }

  // Commits `fill` in a new transaction; "" if it committed, else the transaction_too_large
  // message (any other error fails the test).
  template <typename Fill>
  std::string commit(Fill fill) {
    Transaction tr = db_->create_transaction();
    fill(tr);
    try {
      tr.commit();
      return "";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kTransactionTooLarge) << e.what();
      return e.what();
    }
  }

  std::size_t keys_under(const std::string& prefix) {
    return db_->run([&](Transaction& tr) { return tr.get_range(prefix, prefix + "\xff").size(); });
  }

  std::unique_ptr<EtcdCluster> cluster_;
  std::shared_ptr<Database> db_;
};

TEST_P(EtcdLimitsTest, LimitsFollowTheUrlOptions) {
  EXPECT_TRUE(db_->commits_can_be_unknown());  // so the layers write idempotency markers
  const TransactionLimits limits = db_->limits();
  EXPECT_EQ(limits.max_operations, GetParam().max_operations);
  // Less etcd's raft framing (512) and, per operation, 2 * prefix ("lim/") + 128.
  EXPECT_EQ(limits.max_bytes,
            GetParam().request_bytes - 512 - GetParam().max_operations * (2 * 4 + 128));
}

TEST_P(EtcdLimitsTest, WritesFilledUpToMaxOperationsCommitAndOneMoreFailsNamingTheOption) {
  const std::size_t max = db_->limits().max_operations;
  int n = 0;
  auto fill = [&](Transaction& tr) {
    for (;;) {
      tr.set("w/" + std::to_string(n), "v");
      if (tr.usage().operations > max) return;  // the last set went over
      ++n;
    }
  };
  EXPECT_NE(commit(fill), "") << "over the limit must fail";
  EXPECT_EQ(static_cast<std::size_t>(n), max);
  EXPECT_EQ(keys_under("w/"), 0u) << "a refused commit wrote something";
  const int within = n;
  const std::string message = commit([&](Transaction& tr) {
    for (int i = 0; i <= within; ++i) tr.set("w/" + std::to_string(i), "v");
  });
  EXPECT_NE(message.find("max_txn_ops="), std::string::npos) << message;
  EXPECT_NE(message.find("--max-txn-ops"), std::string::npos) << message;
  EXPECT_EQ(commit([&](Transaction& tr) {
              for (int i = 0; i < within; ++i) tr.set("w/" + std::to_string(i), "v");
              EXPECT_EQ(tr.usage().operations, max);
            }),
            "");
  EXPECT_EQ(keys_under("w/"), max);
}

TEST_P(EtcdLimitsTest, ReadsAndVersionstampsCountAsEtcdCountsThem) {
  const std::size_t max = db_->limits().max_operations;
  db_->run([&](Transaction& tr) {
    for (int i = 0; i < 20; ++i) tr.set("r/" + std::to_string(100 + i), "x");
  });
  // 20 records read + 1 range compare; writes nested under the sequencer Txn: the sum counts.
  auto fill = [&](Transaction& tr, std::size_t target) {
    EXPECT_EQ(tr.get_range("r/", "r0").size(), 20u);
    tr.set_versionstamped_key(
        std::string("s/") + std::string(10, '\0') + std::string("\x02\0\0\0", 4), "v");
    for (int i = 0; tr.usage().operations < target; ++i) tr.set("t/" + std::to_string(i), "v");
  };
  EXPECT_EQ(commit([&](Transaction& tr) { fill(tr, max); }), "");
  EXPECT_EQ(keys_under("s/"), 1u);
  const std::string message = commit([&](Transaction& tr) { fill(tr, max + 1); });
  EXPECT_NE(message.find("--max-txn-ops"), std::string::npos) << message;
}

TEST_P(EtcdLimitsTest, BytesFilledUpToMaxBytesCommitAndOneValueMoreFailsNamingTheOption) {
  const std::size_t max = db_->limits().max_bytes;
  const std::string value(90'000, 'v');
  int n = 0;
  const std::string over = commit([&](Transaction& tr) {
    for (;; ++n) {
      tr.set("b/" + std::to_string(n), value);
      if (tr.usage().bytes > max) return;
    }
  });
  EXPECT_NE(over.find("max_request_bytes="), std::string::npos) << over;
  EXPECT_NE(over.find("--max-request-bytes"), std::string::npos) << over;
  EXPECT_EQ(keys_under("b/"), 0u) << "a refused commit wrote something";
  ASSERT_GT(n, 0);
  EXPECT_EQ(commit([&](Transaction& tr) {
              for (int i = 0; i < n; ++i) tr.set("b/" + std::to_string(i), value);
              EXPECT_LE(tr.usage().bytes, max);
            }),
            "");
  EXPECT_EQ(keys_under("b/"), static_cast<std::size_t>(n));
}

INSTANTIATE_TEST_SUITE_P(Servers, EtcdLimitsTest,
                         ::testing::Values(default_server(), raised_server()),
                         [](const auto& info) { return info.param.name; });

TEST(EtcdLimits, UrlClaimingMoreThanTheServerAllowsGetsTheServersRefusalNamingTheOption) {
  if (!EtcdCluster::available()) GTEST_SKIP() << "etcd not installed";
  EtcdCluster cluster(1);  // etcd's default --max-txn-ops=128
  auto db = open(cluster.url("prefix=lim/&max_txn_ops=512"));
  Transaction tr = db->create_transaction();
  for (int i = 0; i < 200; ++i) tr.set("k/" + std::to_string(i), "v");
  try {
    tr.commit();
    FAIL() << "etcd accepted 200 operations";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTransactionTooLarge) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_txn_ops="), std::string::npos) << e.what();
  }
}

// The cluster's revision now, from etcdctl's JSON answer to a read.
std::string current_revision(const EtcdCluster& cluster) {
  std::string out;
  EXPECT_EQ(cluster.etcdctl({"get", "--write-out=json", "none"}, &out), 0) << out;
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("\"revision\":([0-9]+)"))) return "";
  return m[1];
}

// etcd answers NOSPACE to a Txn it refused (its quota check before proposing, or the alarm
// raised) and to one it applied as the backend crossed its quota, so a NOSPACE commit is
// commit_unknown_result; the engine then probes before each commit and fails it with
// database_full, without sending it, while the cluster is out of space. Four threads push until
// the cluster refuses them: each push returns or throws database_full within the test's time
// (no retry loop spins on unknown results); a pop while it is full is database_full too. Once
// the ballast is deleted, the history compacted, the backend defragmented and the alarm
// disarmed, every push that returned is popped exactly once, in each thread's order, and no push
// that threw database_full was written.
TEST(EtcdLimits, PushesIntoAClusterOutOfSpaceEndInDatabaseFullAndLoseNothing) {
  if (!EtcdCluster::available()) GTEST_SKIP() << "etcd not installed";
  using namespace std::chrono_literals;
  EtcdCluster cluster(1, {"--quota-backend-bytes=8388608"});
  {
    auto ballast = open(cluster.url("prefix=ballast/"));
    for (int t = 0; t < 4; ++t) {
      ballast->run([&](Transaction& tr) {
        for (int i = 0; i < 10; ++i) tr.set(std::to_string(t * 10 + i), std::string(90'000, 'b'));
      });
    }
  }
  auto db = open(cluster.url("prefix=sp/"));
  Queue q(db, Subspace(Tuple().append("q")));
  constexpr int kThreads = 4;
  std::vector<std::vector<std::string>> pushed(kThreads);  // ids ("thread/i") by thread
  std::vector<std::string> refused(kThreads);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0;; ++i) {
        const std::string id = std::to_string(t) + "/" + std::to_string(i);
        try {
          q.push(id + "/" + std::string(40'000, 'v'));
          pushed[t].push_back(id);
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::kDatabaseFull) << e.what();
          refused[t] = id;
          return;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 120s);
  std::size_t total = 0;
  for (const auto& p : pushed) total += p.size();
  EXPECT_GT(total, 10u) << "the quota left room for some pushes";
  std::cout << "pushed " << total << " items before the cluster ran out of space\n";
  try {
    q.pop();
    ADD_FAILURE() << "a pop committed while the cluster is out of space";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDatabaseFull) << e.what();
  }

  std::string out;
  ASSERT_EQ(cluster.etcdctl({"del", "--prefix", "ballast/"}, &out), 0) << out;
  const std::string revision = current_revision(cluster);
  ASSERT_FALSE(revision.empty());
  ASSERT_EQ(cluster.etcdctl({"compact", revision}, &out), 0) << out;
  ASSERT_EQ(cluster.etcdctl({"defrag"}, &out), 0) << out;
  ASSERT_EQ(cluster.etcdctl({"alarm", "disarm"}, &out), 0) << out;

  std::vector<std::string> popped;  // the items' ids
  while (std::optional<std::string> item = q.pop()) {
    popped.push_back(item->substr(0, item->rfind('/')));
  }
  EXPECT_EQ(popped.size(), total) << "every push that returned, once";
  const std::set<std::string> seen(popped.begin(), popped.end());
  EXPECT_EQ(seen.size(), popped.size()) << "no item twice";
  for (int t = 0; t < kThreads; ++t) {
    std::vector<std::string> mine;
    for (const std::string& v : popped) {
      if (v.rfind(std::to_string(t) + "/", 0) == 0) mine.push_back(v);
    }
    EXPECT_EQ(mine, pushed[t]) << "thread " << t << ": its pushes, in order, and not the refused "
                               << refused[t];
  }
}

TEST(EtcdLimits, RequestBytesOptionIsParsedCappedAndChecked) {
  using engine::etcd::parse_etcd_url;
  using engine::etcd::transaction_limits;
  EXPECT_EQ(parse_etcd_url("etcd://h:1?max_request_bytes=262144").max_request_bytes, 262'144u);
  EXPECT_EQ(transaction_limits(parse_etcd_url("etcd://h:1?max_request_bytes=2147483647")).max_bytes,
            kMaxTransactionSize);
  for (const char* url : {"etcd://h:1?max_request_bytes=0", "etcd://h:1?max_request_bytes=x",
                          "etcd://h:1?max_request_bytes=1000",
                          "etcd://h:1?max_request_bytes=100000&max_txn_ops=100000"}) {
    try {
      parse_etcd_url(url);
      ADD_FAILURE() << url << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kConnectionStringInvalid) << url;
    }
  }
}

// A hot counter's delta records are folded by Txns of one compare and one operation per record
// folded, plus one: up to 101, past a server's --max-txn-ops below that. Every fold was refused,
// and the records of a counter past 64 adds piled up for good, each read fetching them all (found
// by review in session 31). Folds now fit max_txn_ops.
TEST(EtcdDeltaFolding, FoldsFitASmallMaxTxnOps) {
  if (!EtcdCluster::available()) GTEST_SKIP() << "etcd not installed";
  EtcdCluster cluster(1, {"--max-txn-ops=64"});
  auto db = open(cluster.url("prefix=fold/&max_txn_ops=64"));
  const int adds = 300;
  for (int i = 0; i < adds; ++i) {
    db->run([](Transaction& tr) { tr.atomic_add("c", std::int64_t{1}); });
  }
  std::string total(8, '\0');
  total[0] = static_cast<char>(adds & 0xff);
  total[1] = static_cast<char>(adds >> 8);
  for (int i = 0; i < 3; ++i) {  // reads fold
    EXPECT_EQ(db->run([](Transaction& tr) { return tr.get("c"); }), total);
  }
  std::string out;
  // (A Range's count is of every key in it, whatever its limit.)
  ASSERT_EQ(cluster.etcdctl(
                {"get", "fold/", "--prefix", "--keys-only", "--limit=1", "--write-out=json"}, &out),
            0)
      << out;
  std::smatch count;
  ASSERT_TRUE(std::regex_search(out, count, std::regex("\"count\":([0-9]+)"))) << out;
  EXPECT_LT(std::stoi(count[1]), 64) << "the counter's records were not folded";
}

}  // namespace
}  // namespace kvq
#endif  // KVQ_WITH_ETCD
