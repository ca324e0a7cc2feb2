// Batch operations (Queue::push_batch / pop_batch, PriorityQueue::push_batch / pop_min_batch /
// pop_max_batch) on every engine, plain and high-contention: order kept, one transaction per
// batch, limits refused before anything is written, exactly once across concurrent batch poppers
// (whole history checked), and nothing twice / nothing lost under injected commit_unknown_result.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "kvq/kvq.h"
#include "layers/fitting.h"
#include "layers/item_keys.h"
#include "support/figures.h"
#include "support/layer_fixture.h"
#include "support/test_values.h"
#include "tools/kvq/history.h"

namespace kvq {
namespace {

using history::now_ns;
using testing::LayerTest;
using testing::numbered;

void expect_ok(const history::Result& r) {
  EXPECT_TRUE(r.ok) << r.violations << " violations";
  for (const auto& p : r.problems) ADD_FAILURE() << p;
}

class BatchTest : public LayerTest {
 protected:
  QueueOptions options() const {
    QueueOptions o;
    o.high_contention = hc();
    return o;
  }
  // Items that fit one transaction of this engine (etcd: --max-txn-ops).
  int fitting() const { return db_->limits().max_operations < 1000 ? 50 : 1000; }
};

TEST_P(BatchTest, QueueBatchesKeepOrder) {
  Queue q(db_, space_, options());
  q.push_batch(numbered(0, 20));
  q.push("v20");
  q.push_batch(numbered(21, 9));
  EXPECT_EQ(q.size(), 30);
  EXPECT_EQ(q.pop_batch(12), numbered(0, 12));
  EXPECT_EQ(q.pop(), "v12");
  EXPECT_EQ(q.pop_batch(100), numbered(13, 17));
  EXPECT_TRUE(q.pop_batch(5).empty());
  EXPECT_EQ(q.size(), 0);
}

TEST_P(BatchTest, QueueBatchesComposeInCallersTransaction) {
  Queue q(db_, space_, options());
  std::vector<std::string_view> views = {"a", "b", "c"};
  db_->run([&](Transaction& tr) {
    q.push_batch(tr, views);
    q.push_batch(tr, std::vector<std::string>{"d"});
  });
  auto got = db_->run([&](Transaction& tr) { return q.pop_batch(tr, 3); });
  EXPECT_EQ(got, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(q.size(), 1);
}

TEST_P(BatchTest, PriorityQueueBatchesKeepPriorityThenBatchOrder) {
  PriorityQueue pq(db_, space_, options());
  pq.push_batch({{"b1", 2}, {"a1", 1}, {"b2", 2}, {"c1", 3}, {"a2", 1}, {"b3", 2}});
  EXPECT_EQ(pq.size(), 6);
  EXPECT_EQ(pq.pop_min_batch(3), (std::vector<std::string>{"a1", "a2", "b1"}));
  EXPECT_EQ(pq.pop_max_batch(2), (std::vector<std::string>{"c1", "b3"}));
  EXPECT_EQ(pq.pop_max_batch(5), (std::vector<std::string>{"b2"}));
  EXPECT_TRUE(pq.pop_min_batch(1).empty());
}

TEST_P(BatchTest, ABatchIsOneTransaction) {
  Queue q(db_, space_, options());
  const int n = fitting();
  const std::uint64_t before = db_->stats().commits;
  q.push_batch(numbered(0, n));
  EXPECT_EQ(db_->stats().commits - before, 1u);
  const std::uint64_t mid = db_->stats().commits;
  EXPECT_EQ(q.pop_batch(static_cast<std::size_t>(n)), numbered(0, n));
  EXPECT_EQ(db_->stats().commits - mid, 1u);
}

TEST_P(BatchTest, BatchesOverTheLimitsFailBeforeWritingAnything) {
  Queue q(db_, space_, options());
  q.push("first");
  std::vector<std::string> big = {"x", std::string(kMaxValueSize + 1, 'y')};
  EXPECT_THROW(q.push_batch(big), Error);
  // More than one transaction takes: 10 MB (or etcd's operations).
  const bool ops_bound = db_->limits().max_operations < 1000;
  std::vector<std::string> many(ops_bound ? 1000 : 110, std::string(ops_bound ? 10 : 99'000, 'z'));
  try {
    q.push_batch(many);
    ADD_FAILURE() << "push_batch over the limits did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTransactionTooLarge) << e.what();
  }
  EXPECT_EQ(q.size(), 1);
  EXPECT_EQ(q.pop_batch(10), std::vector<std::string>{"first"});
}

TEST_P(BatchTest, PopBatchesAreCutToTheEnginesLimits) {
  Queue q(db_, space_, options());
  const int n = fitting();
  for (int i = 0; i < 3; ++i) q.push_batch(numbered(i * n, n));
  std::vector<std::string> all;
  while (true) {
    auto got = q.pop_batch(static_cast<std::size_t>(3 * n));
    if (got.empty()) break;
    all.insert(all.end(), got.begin(), got.end());
  }
  EXPECT_EQ(all, numbered(0, 3 * n));
}

// Producers push batches, consumers pop batches (and single pops); the whole history is checked.
TEST_P(BatchTest, ConcurrentBatchPoppersGetEveryItemExactlyOnce) {
  Queue q(db_, space_, options());
  const int per = GetParam().engine == "etcd" ? 20 : 100;
  const int batches = GetParam().engine == "etcd" ? 40 : 200, producers = 4, consumers = 6;
  std::vector<std::vector<history::Push>> pushes(producers);
  std::vector<std::vector<history::Pop>> pops(consumers);
  std::atomic<int> producing{producers};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (int b = p; b < batches; b += producers) {
        auto values = numbered(b * per, per);
        const std::int64_t start = now_ns();
        q.push_batch(values);
        const std::int64_t end = now_ns();
        for (auto& v : values) pushes[p].push_back({v, 0, start, end});
      }
      --producing;
    });
  }
  for (int c = 0; c < consumers; ++c) {
    threads.emplace_back([&, c] {
      for (int empties = 0; empties < 2;) {
        const bool done = producing.load() == 0;
        const std::int64_t start = now_ns();
        std::vector<std::string> got = q.pop_batch(static_cast<std::size_t>(1 + c * 7));
        const std::int64_t end = now_ns();
        for (auto& v : got) pops[c].push_back({history::PopKind::kFifo, v, start, end});
        if (got.empty()) pops[c].push_back({history::PopKind::kFifo, std::nullopt, start, end});
        empties = (got.empty() && done) ? empties + 1 : 0;
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<history::Push> all_pushes;
  for (auto& v : pushes) all_pushes.insert(all_pushes.end(), v.begin(), v.end());
  std::vector<history::Pop> all_pops;
  for (auto& v : pops) all_pops.insert(all_pops.end(), v.begin(), v.end());
  auto r = history::check(all_pushes, all_pops);
  testing::record_history(r);
  EXPECT_EQ(r.popped, per * batches);
  expect_ok(r);
  EXPECT_EQ(q.size(), 0);
}

// The read of a combined group's pop batch (src/layers/fitting.h, ShortBatch): a batch that finds
// fewer items than it asks for read-conflicts only up to the last item it took under
// kSaysNothing, so a push committed meanwhile beyond that item does not make it conflict; under
// kMeansNoMore (pop_batch's "fewer if the queue holds fewer") it does. A batch that finds nothing
// conflicts under both: it answers that the queue is empty. At each end of a PriorityQueue.
TEST_P(BatchTest, AShortBatchConflictsWithPushesMeanwhileOnlyIfItMeansNoMore) {
  if (hc()) GTEST_SKIP() << "the engine's read conflicts: checked once per engine";
  using contention::Side;
  using detail::ShortBatch;
  PriorityQueue pq(db_, space_);
  const contention::ItemRange items = detail::item_range_of(space_, /*prioritized=*/true, "");
  const std::string other_key = space_.pack(Tuple().append("not an item"));
  for (const Side side : {Side::kFront, Side::kBack}) {
    for (const ShortBatch short_batch : {ShortBatch::kSaysNothing, ShortBatch::kMeansNoMore}) {
      for (const std::size_t held : {2, 0}) {
        SCOPED_TRACE((side == Side::kFront ? "front, " : "back, ") +
                     std::string(short_batch == ShortBatch::kSaysNothing ? "says nothing, "
                                                                         : "means no more, ") +
                     std::to_string(held) + " items");
        pq.clear();
        for (std::size_t i = 0; i < held; ++i) pq.push("held" + std::to_string(i), 5);
        Transaction tr = db_->create_transaction();
        tr.set(other_key, "");  // a read-only transaction would never conflict
        const std::size_t taken = detail::consume_fitting(tr, items, db_->limits(), side, 5,
                                                          short_batch, detail::ItemWrites::kKeyOnly,
                                                          [&](KeyValue& kv) { tr.clear(kv.key); });
        EXPECT_EQ(taken, held);
        pq.push("meanwhile", side == Side::kFront ? 9 : 1);  // beyond the batch's far end
        const bool conflicts_expected = held == 0 || short_batch == ShortBatch::kMeansNoMore;
        try {
          tr.commit();
          EXPECT_FALSE(conflicts_expected) << "committed";
          EXPECT_EQ(pq.size(), 1);
        } catch (const Error& e) {
          EXPECT_TRUE(conflicts_expected) << e.what();
          EXPECT_EQ(e.code(), ErrorCode::kNotCommitted) << e.what();
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, BatchTest, ::testing::ValuesIn(testing::layer_params()),
                         testing::layer_param_name);

// Batches through `memory:?unknown_result_rate=0.2&fault_seed=N`: every batch retried after an
// unknown result neither inserts twice nor loses what it popped.
TEST(BatchFaults, UnknownResultsNeitherDuplicateNorLoseBatches) {
  for (int seed : {1, 2, 3}) {
    auto db = kvq::open("memory:?unknown_result_rate=0.2&fault_seed=" + std::to_string(seed));
    Queue q(db, Subspace(Tuple().append("bf")));
    PriorityQueue pq(db, Subspace(Tuple().append("pf")));
    const int batches = 200, per = 10;
    std::atomic<int> producing{2};
    std::vector<std::string> popped, pq_popped;
    std::thread producer([&] {
      for (int b = 0; b < batches; ++b) q.push_batch(numbered(b * per, per));
      --producing;
    });
    std::thread pq_producer([&] {
      for (int b = 0; b < batches; ++b) {
        std::vector<std::pair<std::string, std::int64_t>> items;
        for (auto& v : numbered(b * per, per)) items.emplace_back(v, b % 7);
        pq.push_batch(items);
      }
      --producing;
    });
    std::thread consumer([&] {
      for (int k = 0; producing.load() > 0 || !q.empty() || !pq.empty(); ++k) {
        for (auto& v : q.pop_batch(7)) popped.push_back(v);
        for (auto& v : (k % 2 ? pq.pop_max_batch(5) : pq.pop_min_batch(5))) pq_popped.push_back(v);
      }
    });
    producer.join();
    pq_producer.join();
    consumer.join();
    for (auto* got : {&popped, &pq_popped}) {
      std::sort(got->begin(), got->end());
      auto expected = numbered(0, batches * per);
      std::sort(expected.begin(), expected.end());
      EXPECT_EQ(*got, expected) << "seed " << seed;
    }
    EXPECT_EQ(q.size(), 0);
    EXPECT_EQ(pq.size(), 0);
    testing::record_figure(testing::kOperationsChecked, 4 * batches * per);
    testing::record_faults(*db);
  }
}

}  // namespace
}  // namespace kvq
