// Serializability under concurrency: bank transfers between accounts, each reading both balances
// with conflicting reads, from many threads, while auditors keep reading all accounts. The total
// never changes and no balance goes negative, in every snapshot any auditor sees and at the end.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kvq/database.h"
#include "support/engines.h"

namespace kvq {
namespace {

constexpr int kAccounts = 16;
constexpr std::int64_t kInitial = 1000;

std::string account(int i) { return "acct/" + std::to_string(1000 + i); }

std::int64_t parse(const std::string& s) { return std::stoll(s); }

class BankTest : public ::testing::TestWithParam<testing::EngineFactory> {};

TEST_P(BankTest, ConcurrentTransfersPreserveTheTotal) {
  auto db = GetParam().open({});
  db->run([](Transaction& tr) {
    for (int i = 0; i < kAccounts; ++i) tr.set(account(i), std::to_string(kInitial));
  });
  const std::int64_t total = kAccounts * kInitial;
  const int kWorkers = 8;
  const int kTransfersPerWorker = 12500;  // 100,000 committed transfers in all
  std::atomic<bool> stop{false};
  std::atomic<int> audits{0};
  std::atomic<int> bad_audits{0};

  std::vector<std::thread> auditors;
  for (int a = 0; a < 2; ++a) {
    auditors.emplace_back([&, a] {
      while (!stop.load()) {
        auto kvs = db->run([&](Transaction& tr) {
          return tr.get_range("acct/", "acct0", {.snapshot = a == 0});
        });
        std::int64_t sum = 0;
        bool negative = false;
        for (const KeyValue& kv : kvs) {
          std::int64_t b = parse(kv.value);
          negative |= b < 0;
          sum += b;
        }
        if (sum != total || negative || kvs.size() != kAccounts) ++bad_audits;
        ++audits;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  }

  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      std::mt19937 rng(w);
      for (int n = 0; n < kTransfersPerWorker; ++n) {
        int from = static_cast<int>(rng() % kAccounts);
        int to = static_cast<int>(rng() % (kAccounts - 1));
        if (to >= from) ++to;
        std::int64_t amount = 1 + rng() % 50;
        db->run([&](Transaction& tr) {
          std::int64_t a = parse(*tr.get(account(from)));
          if (n % 4 == 0) std::this_thread::yield();  // widen the race window sometimes
          std::int64_t b = parse(*tr.get(account(to)));
          std::int64_t moved = std::min(a, amount);  // never overdraw
          tr.set(account(from), std::to_string(a - moved));
          tr.set(account(to), std::to_string(b + moved));
        });
      }
    });
  }
  for (auto& t : workers) t.join();
  stop = true;
  for (auto& t : auditors) t.join();

  std::int64_t sum = 0;
  auto kvs = db->run([](Transaction& tr) { return tr.get_range("acct/", "acct0"); });
  ASSERT_EQ(kvs.size(), static_cast<std::size_t>(kAccounts));
  for (const KeyValue& kv : kvs) {
    EXPECT_GE(parse(kv.value), 0);
    sum += parse(kv.value);
  }
  EXPECT_EQ(sum, total);
  EXPECT_EQ(bad_audits.load(), 0);
  EXPECT_GT(audits.load(), 0);
  DatabaseStats stats = db->stats();
  EXPECT_GE(stats.commits, static_cast<std::uint64_t>(kWorkers * kTransfersPerWorker) + 1);
  std::printf("bank: %llu commits, %llu conflicts, %llu retries, %llu batches, %d audits\n",
              static_cast<unsigned long long>(stats.commits),
              static_cast<unsigned long long>(stats.conflicts),
              static_cast<unsigned long long>(stats.retries),
              static_cast<unsigned long long>(stats.commit_batches), audits.load());
}

// Lost updates are exactly what conflicting reads prevent: read-modify-write increments from many
// threads with plain get/set must all count.
TEST_P(BankTest, ReadModifyWriteIncrementsAreNeverLost) {
  auto db = GetParam().open({});
  const int kThreads = 8, kPerThread = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        db->run([](Transaction& tr) {
          auto v = tr.get("counter");
          tr.set("counter", std::to_string(v ? parse(*v) + 1 : 1));
        });
      }
    });
  }
  for (auto& t : threads) t.join();
  auto v = db->run([](Transaction& tr) { return tr.get("counter"); });
  EXPECT_EQ(parse(*v), kThreads * kPerThread);
}

INSTANTIATE_TEST_SUITE_P(Engines, BankTest, ::testing::ValuesIn(testing::conformance_engines()),
                         [](const ::testing::TestParamInfo<testing::EngineFactory>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace kvq
