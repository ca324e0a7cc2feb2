// Fault injection through the URL of every engine (docs/engines.md, "Fault injection"): users test
// their own transactional code against commit_unknown_result, spurious conflicts and
// transaction_too_old with `memory:?unknown_result_rate=0.2&fault_seed=7` and the like. Checks that
// malformed values open nothing, that a seed replays the same faults, that the faults really
// happen, and that the layers' and the retry loop's guarantees hold under them on every engine.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "kvq/kvq.h"
#include "support/engines.h"
#include "support/fault_urls.h"
#include "support/figures.h"

namespace kvq {
namespace {

using testing::faulty_urls;

TEST(FaultUrl, MalformedValuesThrowConnectionStringInvalidAndOpenNothing) {
  const std::vector<std::string> bad = {"unknown_result_rate=1.5",
                                        "unknown_result_rate=-0.1",
                                        "conflict_rate=abc",
                                        "too_old_rate=",
                                        "too_old_rate=0.5x",
                                        "delay_ms=-1",
                                        "delay_ms=1.5",
                                        "fault_seed=-3",
                                        "fault_seed=seven",
                                        "unknown_result_rate=0.8&conflict_rate=0.5"};
  for (const std::string& query : bad) {
    SCOPED_TRACE(query);
    EXPECT_EQ(testing::open_error("memory:?" + query), ErrorCode::kConnectionStringInvalid);
#ifdef KVQ_WITH_ROCKSDB
    const std::string dir = testing::fresh_temp_dir("kvq-fault-url") + "/never";
    EXPECT_EQ(testing::open_error("rocksdb:" + dir + "?" + query),
              ErrorCode::kConnectionStringInvalid);
    EXPECT_FALSE(std::filesystem::exists(dir)) << "a rejected URL created " << dir;
#endif
  }
  testing::record_figure("bad inputs: malformed fault URL values", std::ssize(bad));
}

// The outcome of each of `n` single-key commits, one thread, as a string of codes ('.' = ok).
std::string commit_outcomes(const std::string& url, int n) {
  auto db = kvq::open(url);
  std::string out;
  for (int i = 0; i < n; ++i) {
    Transaction tr = db->create_transaction();
    try {
      tr.get("k");
      tr.set("k", std::to_string(i));
      tr.commit();
      out.push_back('.');
    } catch (const Error& e) {
      out.push_back(e.code() == ErrorCode::kCommitUnknownResult ? 'u'
                    : e.code() == ErrorCode::kNotCommitted      ? 'c'
                    : e.code() == ErrorCode::kTransactionTooOld ? 'o'
                                                                : '?');
    }
  }
  return out;
}

TEST(FaultUrl, TheSameSeedGivesTheSameFaultsAndEveryKindHappens) {
  const std::string faults = "unknown_result_rate=0.2&conflict_rate=0.1&too_old_rate=0.1";
  const std::string a = commit_outcomes("memory:?" + faults + "&fault_seed=7", 400);
  const std::string b = commit_outcomes("memory:?" + faults + "&fault_seed=7", 400);
  const std::string c = commit_outcomes("memory:?" + faults + "&fault_seed=8", 400);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (char kind : std::string("uco.")) {
    EXPECT_NE(a.find(kind), std::string::npos) << "no '" << kind << "' in " << a;
  }
  EXPECT_EQ(a.find('?'), std::string::npos);
}

TEST(FaultUrl, DelayMsSlowsEveryCommit) {
  auto db = kvq::open("memory:?delay_ms=20");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) db->run([&](Transaction& tr) { tr.set("k", "v"); });
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
}

TEST(FaultUrl, RetryLoopCountsExactlyUnderConflictsAndTooOldOnEveryEngine) {
  for (const std::string& url : faulty_urls("conflict_rate=0.2&too_old_rate=0.1&fault_seed=3")) {
    SCOPED_TRACE(url);
    auto db = kvq::open(url);
    const int n = url.rfind("etcd", 0) == 0 ? 60 : 300;
    for (int i = 0; i < n; ++i) {
      db->run([&](Transaction& tr) {
        auto v = tr.get("counter");
        tr.set("counter", std::to_string(v ? std::stoi(*v) + 1 : 1));
      });
    }
    EXPECT_EQ(db->run([](Transaction& tr) { return tr.get("counter"); }), std::to_string(n));
    EXPECT_GT(db->stats().retries, 0u) << "no fault was injected";
  }
}

TEST(FaultUrl, QueueDeliversEveryItemOnceUnderUnknownResultsOnEveryEngine) {
  for (const std::string& url : faulty_urls("unknown_result_rate=0.3&fault_seed=11")) {
    SCOPED_TRACE(url);
    auto db = kvq::open(url);
    Queue q(db, Subspace(Tuple().append("fq")));
    const int n = url.rfind("etcd", 0) == 0 ? 60 : 300;
    for (int i = 0; i < n; ++i) q.push("item-" + std::to_string(i));
    std::vector<std::string> popped;
    while (auto v = q.pop()) popped.push_back(*v);
    ASSERT_EQ(popped.size(), static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) EXPECT_EQ(popped[i], "item-" + std::to_string(i));
    EXPECT_GT(db->stats().retries, 0u) << "no fault was injected";
    testing::record_faults(*db);
    testing::record_figure(testing::kOperationsChecked, 2 * n + 1);
  }
}

}  // namespace
}  // namespace kvq
