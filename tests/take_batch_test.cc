// Take batches (Queue::take_batch, PriorityQueue::take_min_batch / take_max_batch) on every engine,
// plain and high-contention: pop_batch's order (FIFO; priority then FIFO), one transaction per
// batch (the database's commit counter), cut to the engine's limits, due timers released first,
// bad input refused with nothing changed, concurrent takers + ackers get every item exactly once
// (whole history checked), and under injected commit_unknown_result a batch is neither leased
// twice nor lost.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kvq/kvq.h"
#include "support/fault_urls.h"
#include "support/figures.h"
#include "support/layer_fixture.h"
#include "support/test_values.h"
#include "tools/kvq/history.h"

namespace kvq {
namespace {

using namespace std::chrono_literals;
using history::now_ns;
using testing::LayerTest;
using testing::numbered;

std::vector<std::string> values_of(const std::vector<Lease>& leases) {
  std::vector<std::string> out;
  for (const Lease& l : leases) out.push_back(l.value);
  return out;
}

class TakeBatchTest : public LayerTest {
 protected:
  QueueOptions options() const {
    QueueOptions o;
    o.high_contention = hc();
    return o;
  }
  bool etcd() const { return GetParam().engine == "etcd"; }
};

TEST_P(TakeBatchTest, QueueTakeBatchKeepsFifoOrder) {
  Queue q(db_, space_, options());
  q.push_batch(numbered(0, 20));
  const std::vector<Lease> first = q.take_batch(12, 30s);
  EXPECT_EQ(values_of(first), numbered(0, 12));
  for (const Lease& l : first) EXPECT_EQ(l.attempt, 1);
  EXPECT_EQ(q.take(30s)->value, "v12");
  EXPECT_EQ(values_of(q.take_batch(100, 30s)), numbered(13, 7));
  EXPECT_TRUE(q.take_batch(5, 30s).empty());
  const QueueStats s = q.stats();
  EXPECT_EQ(s.ready, 0);
  EXPECT_EQ(s.leased, 20);
  for (const Lease& l : first) q.ack(l);
  EXPECT_EQ(q.stats().leased, 8);
}

TEST_P(TakeBatchTest, PriorityQueueTakeBatchesKeepPriorityThenFifoOrder) {
  PriorityQueue pq(db_, space_, options());
  pq.push_batch({{"b1", 2}, {"a1", 1}, {"b2", 2}, {"c1", 3}, {"a2", 1}, {"b3", 2}});
  const std::vector<Lease> low = pq.take_min_batch(3, 30s);
  EXPECT_EQ(values_of(low), (std::vector<std::string>{"a1", "a2", "b1"}));
  EXPECT_EQ(low[2].priority, 2);
  EXPECT_EQ(values_of(pq.take_max_batch(2, 30s)), (std::vector<std::string>{"c1", "b3"}));
  EXPECT_EQ(values_of(pq.take_max_batch(5, 30s)), (std::vector<std::string>{"b2"}));
  EXPECT_TRUE(pq.take_min_batch(1, 30s).empty());
  EXPECT_EQ(pq.stats().leased, 6);
}

// One commit for the whole batch; on etcd (--max-txn-ops) the batch is cut to what fits in one.
TEST_P(TakeBatchTest, ATakeBatchOfAThousandItemsIsOneTransaction) {
  Queue q(db_, space_, options());
  const int n = 1000;
  for (int i = 0; i < n; i += 50) q.push_batch(numbered(i, 50));
  const std::uint64_t before = db_->stats().commits;
  const std::vector<Lease> got = q.take_batch(n, 30s);
  EXPECT_EQ(db_->stats().commits - before, 1u);
  std::printf("take_batch(%d) on %s: %zu leases in one commit\n", n, GetParam().engine.c_str(),
              got.size());
  if (etcd()) {
    EXPECT_GT(got.size(), 10u);
    EXPECT_LT(got.size(), static_cast<std::size_t>(n)) << "etcd's --max-txn-ops cuts the batch";
  } else {
    EXPECT_EQ(got.size(), static_cast<std::size_t>(n));
  }
  EXPECT_EQ(values_of(got), numbered(0, static_cast<int>(got.size())));
  EXPECT_EQ(q.stats().leased, static_cast<std::int64_t>(got.size()));
  EXPECT_EQ(q.size(), n - static_cast<std::int64_t>(got.size()));
}

// A batch's room was reckoned from its first item: a small one followed by large ones made every
// take_batch outgrow the limits (transaction_too_large, on every call, until the front changed;
// found by review in session 31). Larger items now count by their size.
TEST_P(TakeBatchTest, ASmallItemFollowedByLargeOnesIsTakenInBatchesThatFit) {
  Queue q(db_, space_, options());
  q.push("small");
  const int large = 110;  // 10.9 MB: past the memory engine's 10 MB and etcd's 1.5 MiB
  for (int i = 0; i < large; ++i) q.push(std::string(99'000, static_cast<char>('a' + i % 26)));
  std::vector<std::string> taken;
  for (int calls = 0; calls < 2 * large && taken.size() < 1 + large; ++calls) {
    const std::vector<Lease> got = q.take_batch(1000, 30s);
    ASSERT_FALSE(got.empty());
    for (const Lease& l : got) taken.push_back(l.value);
  }
  ASSERT_EQ(taken.size(), 1u + large);
  EXPECT_EQ(taken[0], "small");
  for (int i = 0; i < large; ++i) {
    EXPECT_EQ(taken[1 + i], std::string(99'000, static_cast<char>('a' + i % 26))) << i;
  }
}

// Pops write nothing of a value: the same items in one pop batch where the engine's operation
// limit allows (a first take at this fix counted large values for pops too: 26 of 111).
TEST_P(TakeBatchTest, ASmallItemFollowedByLargeOnesIsPoppedInOneBatch) {
  Queue q(db_, space_, options());
  q.push("small");
  const int large = 110;
  for (int i = 0; i < large; ++i) q.push(std::string(99'000, static_cast<char>('a' + i % 26)));
  const std::vector<std::string> got = q.pop_batch(1000);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0], "small");
  if (!etcd()) {  // (on etcd its operation limit cuts the batch)
    EXPECT_EQ(got.size(), 1u + large);
  }
}

TEST_P(TakeBatchTest, TakeBatchMovesDueTimersBackFirst) {
  Queue q(db_, space_, options());
  q.push_batch({"a", "b"});
  ASSERT_EQ(q.take(100ms)->value, "a");
  std::this_thread::sleep_for(150ms);  // the lease of "a" runs out: "a" is back at the front
  const std::vector<Lease> got = q.take_batch(2, 30s);
  ASSERT_EQ(values_of(got), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(got[0].attempt, 2);
  EXPECT_EQ(got[1].attempt, 1);
}

TEST_P(TakeBatchTest, BadInputChangesNothingAndZeroTakesNothing) {
  Queue q(db_, space_, options());
  PriorityQueue pq(db_, space_.subspace(Tuple().append("pq")), options());
  q.push("a");
  pq.push("p", 1);
  for (auto vt : {0ms, -5ms}) {
    for (std::size_t n : {std::size_t{0}, std::size_t{3}}) {
      EXPECT_THROW(q.take_batch(n, vt), Error);
      EXPECT_THROW(pq.take_min_batch(n, vt), Error);
      EXPECT_THROW(pq.take_max_batch(n, vt), Error);
      EXPECT_THROW(db_->run([&](Transaction& tr) { return q.take_batch(tr, n, vt); }), Error);
    }
  }
  try {
    q.take_batch(1, 0ms);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidOptionValue);
  }
  EXPECT_TRUE(q.take_batch(0, 30s).empty());
  EXPECT_TRUE(pq.take_max_batch(0, 30s).empty());
  EXPECT_EQ(q.stats().leased, 0);
  EXPECT_EQ(q.size(), 1);
  EXPECT_EQ(pq.size(), 1);
}

TEST_P(TakeBatchTest, TakeBatchComposesWithTheCallersWrites) {
  Queue q(db_, space_, options());
  q.push_batch({"a", "b", "c"});
  const auto got = db_->run([&](Transaction& tr) {
    tr.set(space_.pack(Tuple().append("mine")), "x");
    return q.take_batch(tr, 2, 30s);
  });
  EXPECT_EQ(values_of(got), (std::vector<std::string>{"a", "b"}));
  db_->run([&](Transaction& tr) {
    for (const Lease& l : got) q.ack(tr, l);
  });
  EXPECT_EQ(q.stats().leased, 0);
  EXPECT_EQ(q.pop(), "c");
}

// A batch after the caller's reads: its size came from the first item's cost, which reads low on
// etcd (it counts max(compares, writes)) when the transaction's compares lead. A peek before a pop
// batch made it 0 (the pop's conflict merged with the peek's): 300 items and transaction_too_large
// (found by review in session 32). Each further item now counts at least its writes, or one
// compare if more. The take batch after 60 reads checks a take's 4 writes an item fit as well
// (it passed before too).
TEST_P(TakeBatchTest, BatchesAfterTheCallersReadsFitTheEngineLimits) {
  Queue q(db_, space_, options());
  for (int i = 0; i < 600; i += 100) q.push_batch(numbered(i, 100));
  const std::vector<std::string> popped = db_->run([&](Transaction& tr) {
    EXPECT_EQ(q.peek(tr), numbered(0, 1)[0]);
    return q.pop_batch(tr, 300);
  });
  ASSERT_FALSE(popped.empty());
  const std::vector<Lease> taken = db_->run([&](Transaction& tr) {
    for (int i = 0; i < 60; ++i) tr.get(space_.pack(Tuple().append("read").append(i)));
    return q.take_batch(tr, 300, 30s);
  });
  ASSERT_FALSE(taken.empty());
  std::vector<std::string> all = popped;
  for (const Lease& l : taken) all.push_back(l.value);
  EXPECT_EQ(all, numbered(0, static_cast<int>(all.size())));
  if (!etcd()) {
    EXPECT_EQ(all.size(), 600u);
  }
}

// 8 threads take batches and ack every lease while a producer pushes; leases do not run out, so
// a take is a pop for the history checker: each item delivered exactly once, FIFO order.
TEST_P(TakeBatchTest, ConcurrentTakeBatchesAndAcksGetEveryItemExactlyOnce) {
  Queue q(db_, space_, options());
  const int per = etcd() ? 10 : 50, batches = etcd() ? 20 : (testing::kSanitizerBuild ? 40 : 100);
  constexpr int kTakers = 8;
  std::vector<history::Push> pushes;
  std::vector<std::vector<history::Pop>> pops(kTakers);
  std::atomic<bool> producing{true};
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    for (int b = 0; b < batches; ++b) {
      auto values = numbered(b * per, per);
      const std::int64_t start = now_ns();
      q.push_batch(values);
      const std::int64_t end = now_ns();
      for (auto& v : values) pushes.push_back({v, 0, start, end});
    }
    producing = false;
  });
  for (int t = 0; t < kTakers; ++t) {
    threads.emplace_back([&, t] {
      for (int empties = 0; empties < 2;) {
        const bool done = !producing.load();
        const std::int64_t start = now_ns();
        const std::vector<Lease> got = q.take_batch(static_cast<std::size_t>(1 + t * 3), 60s);
        const std::int64_t end = now_ns();
        for (const Lease& l : got) {
          q.ack(l);  // throws lease_lost if another worker had it
          pops[t].push_back({history::PopKind::kFifo, l.value, start, end});
        }
        if (got.empty()) pops[t].push_back({history::PopKind::kFifo, std::nullopt, start, end});
        empties = (got.empty() && done) ? empties + 1 : 0;
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<history::Pop> all;
  for (auto& v : pops) all.insert(all.end(), v.begin(), v.end());
  const history::Result r = history::check(pushes, all);
  testing::record_history(r);
  EXPECT_EQ(r.popped, per * batches);
  EXPECT_TRUE(r.ok) << r.violations << " violations";
  for (const auto& p : r.problems) ADD_FAILURE() << p;
  const QueueStats s = q.stats();
  EXPECT_EQ(s.ready, 0);
  EXPECT_EQ(s.leased, 0);
}

INSTANTIATE_TEST_SUITE_P(Engines, TakeBatchTest, ::testing::ValuesIn(testing::layer_params()),
                         testing::layer_param_name);

// Take batches through the fault URL `...?unknown_result_rate=0.3` on every engine
// (docs/engines.md): a batch retried after commit_unknown_result (applied or not) neither leases an
// item twice nor loses the leases. A lost lease would leave its item leased and never acked (the
// visibility timeout is a minute); a second lease of a batch would deliver an item twice.
TEST(TakeBatchFaults, UnknownResultsNeitherLeaseTwiceNorLoseLeases) {
  for (const std::string& url : testing::faulty_urls("unknown_result_rate=0.3&fault_seed=11")) {
    SCOPED_TRACE(url);
    auto db = kvq::open(url);
    Queue q(db, Subspace(Tuple().append("tf")));
    PriorityQueue pq(db, Subspace(Tuple().append("pf")));
    const int n = url.rfind("etcd", 0) == 0 ? 60 : 300;
    for (int i = 0; i < n; i += 10) {
      q.push_batch(numbered(i, 10));
      std::vector<std::pair<std::string, std::int64_t>> items;
      for (auto& v : numbered(i, 10)) items.emplace_back(v, i % 3);
      pq.push_batch(items);
    }
    std::vector<std::string> acked, pq_acked;
    for (int k = 0;; ++k) {
      const std::vector<Lease> got = q.take_batch(7, 60s);
      const std::vector<Lease> pgot = k % 2 ? pq.take_max_batch(5, 60s) : pq.take_min_batch(5, 60s);
      if (got.empty() && pgot.empty()) break;
      for (const Lease& l : got) {
        EXPECT_EQ(l.attempt, 1) << l.value;
        q.ack(l);
        acked.push_back(l.value);
      }
      for (const Lease& l : pgot) {
        EXPECT_EQ(l.attempt, 1) << l.value;
        pq.ack(l);
        pq_acked.push_back(l.value);
      }
    }
    EXPECT_GT(db->stats().retries, 0u) << "no fault was injected";
    testing::record_faults(*db);
    testing::record_figure(testing::kOperationsChecked, 4 * n);
    EXPECT_EQ(acked, numbered(0, n)) << "FIFO, each once";
    std::sort(pq_acked.begin(), pq_acked.end());
    auto expected = numbered(0, n);
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(pq_acked, expected);
    for (const QueueStats& s : {q.stats(), pq.stats()}) {
      EXPECT_EQ(s.ready, 0);
      EXPECT_EQ(s.leased, 0) << "a lease was lost";
    }
  }
}

}  // namespace
}  // namespace kvq
