#include "kvq/priority_queue.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "kvq/kvq.h"
#include "layers/item_keys.h"
#include "support/layer_fixture.h"

namespace kvq {
namespace {

using testing::LayerTest;

class PriorityQueueTest : public LayerTest {
 protected:
  PriorityQueue make() {
    PriorityQueueOptions o;
    o.high_contention = hc();
    return PriorityQueue(db_, space_, o);
  }
};

TEST_P(PriorityQueueTest, PopMinReturnsLowestPriorityOldestFirst) {
  PriorityQueue pq = make();
  pq.push("b1", 5);
  pq.push("a1", 1);
  pq.push("b2", 5);
  pq.push("a2", 1);
  pq.push("c", 9);
  EXPECT_EQ(pq.pop_min(), "a1");
  EXPECT_EQ(pq.pop_min(), "a2");
  EXPECT_EQ(pq.pop_min(), "b1");
  EXPECT_EQ(pq.pop_min(), "b2");
  EXPECT_EQ(pq.pop_min(), "c");
  EXPECT_EQ(pq.pop_min(), std::nullopt);
}

TEST_P(PriorityQueueTest, PopMaxReturnsHighestPriorityNewestFirst) {
  PriorityQueue pq = make();
  pq.push("b1", 5);
  pq.push("c1", 9);
  pq.push("b2", 5);
  pq.push("c2", 9);
  pq.push("a", 1);
  EXPECT_EQ(pq.pop_max(), "c2");
  EXPECT_EQ(pq.pop_max(), "c1");
  EXPECT_EQ(pq.pop_max(), "b2");
  EXPECT_EQ(pq.pop_max(), "b1");
  EXPECT_EQ(pq.pop_max(), "a");
  EXPECT_EQ(pq.pop_max(), std::nullopt);
}

TEST_P(PriorityQueueTest, PeeksShowWhatPopsWouldReturn) {
  PriorityQueue pq = make();
  EXPECT_EQ(pq.peek_min(), std::nullopt);
  EXPECT_EQ(pq.peek_max(), std::nullopt);
  pq.push("lo", -3);
  pq.push("hi", 3);
  EXPECT_EQ(pq.peek_min(), "lo");
  EXPECT_EQ(pq.peek_max(), "hi");
  EXPECT_EQ(pq.size(), 2);
}

TEST_P(PriorityQueueTest, ExtremeAndNegativePrioritiesOrderCorrectly) {
  PriorityQueue pq = make();
  const auto lo = std::numeric_limits<std::int64_t>::min();
  const auto hi = std::numeric_limits<std::int64_t>::max();
  pq.push("zero", 0);
  pq.push("max", hi);
  pq.push("minus", -1);
  pq.push("min", lo);
  pq.push("plus", 1);
  EXPECT_EQ(pq.pop_min(), "min");
  EXPECT_EQ(pq.pop_max(), "max");
  EXPECT_EQ(pq.pop_min(), "minus");
  EXPECT_EQ(pq.pop_max(), "plus");
  EXPECT_EQ(pq.pop_min(), "zero");
  EXPECT_TRUE(pq.empty());
}

// The count is the push counter's value: one counter for all priorities, so a push reads one key
// whatever its priority, and each push goes behind every push committed before it started.
TEST_P(PriorityQueueTest, KeyLayoutIsPriorityCountRandom) {
  PriorityQueue pq = make();
  pq.push("a", 7);
  pq.push("b", 7);
  pq.push("c", 2);
  pq.push_batch({{"d", 7}, {"e", 2}});
  auto kvs = db_->run(
      [&](Transaction& tr) { return tr.get_range(space_.key() + '\x0c', space_.key() + '\x1d'); });
  ASSERT_EQ(kvs.size(), 5u);
  std::vector<std::pair<std::int64_t, std::int64_t>> places;  // (priority, count) in key order
  for (const KeyValue& kv : kvs) {
    const Tuple t = space_.unpack(kv.key);
    places.emplace_back(t.get_int(0), t.get_int(1));
    EXPECT_EQ(t.get_bytes(2).data.size(), 20u);
  }
  const std::vector<std::pair<std::int64_t, std::int64_t>> expected = {
      {2, 2}, {2, 4}, {7, 0}, {7, 1}, {7, 3}};
  EXPECT_EQ(places, expected);
  const auto counter = db_->run(
      [&](Transaction& tr) { return tr.get(space_.pack(Tuple().append("kvq").append("count"))); });
  ASSERT_TRUE(counter);
  EXPECT_EQ(common::decode_le64(*counter), 5);
}

// Items written by a kvq before the push counter (counts per priority, from 0) stay ahead of the
// items pushed after it in their priority: the counter then starts far above any such count.
TEST_P(PriorityQueueTest, PushesGoBehindItemsOfTheLayoutBeforeThePushCounter) {
  db_->run([&](Transaction& tr) {
    for (int i = 0; i < 3; ++i) {
      tr.set(space_.pack(Tuple().append(4).append(i).append(Bytes(std::string(20, 'r')))),
             "old" + std::to_string(i));
    }
    tr.atomic_add(space_.pack(Tuple().append("kvq").append("size")), 3);
  });
  PriorityQueue pq = make();
  pq.push("new", 4);
  pq.push("lower", 3);
  EXPECT_EQ(pq.pop_min(), "lower");
  EXPECT_EQ(pq.pop_min(), "old0");
  EXPECT_EQ(pq.pop_max(), "new");
  EXPECT_EQ(pq.pop_min(), "old1");
  EXPECT_EQ(pq.pop_min(), "old2");
  EXPECT_FALSE(pq.pop_min());
}

TEST_P(PriorityQueueTest, SizeAndClear) {
  PriorityQueue pq = make();
  for (int i = 0; i < 10; ++i) pq.push("x" + std::to_string(i), i % 3);
  EXPECT_EQ(pq.size(), 10);
  pq.pop_min();
  pq.pop_max();
  EXPECT_EQ(pq.size(), 8);
  pq.clear();
  EXPECT_EQ(pq.size(), 0);
  EXPECT_EQ(pq.pop_min(), std::nullopt);
  EXPECT_EQ(pq.pop_max(), std::nullopt);
}

TEST_P(PriorityQueueTest, OperationsComposeInOneTransaction) {
  PriorityQueue pq = make();
  Queue q(db_, space_.subspace(Tuple().append("q")), {});
  pq.push("p1", 1);
  pq.push("p9", 9);
  db_->run([&](Transaction& tr) {
    auto lo = pq.pop_min(tr);
    auto hi = pq.pop_max(tr);
    ASSERT_TRUE(lo && hi);
    q.push(tr, *lo + *hi);
    pq.push(tr, "new", 5);
  });
  EXPECT_EQ(q.pop(), "p1p9");
  EXPECT_EQ(pq.pop_min(), "new");
  EXPECT_TRUE(pq.empty());
}

// The same when the only trace of the earlier layout is an item out on lease (its held place):
// it comes back at its own count, ahead of what was pushed meanwhile.
TEST_P(PriorityQueueTest, PushesGoBehindHeldPlacesOfTheLayoutBeforeThePushCounter) {
  const std::string base = Tuple().append(4).append(7).append(Bytes(std::string(20, 'r'))).pack();
  db_->run([&](Transaction& tr) {
    tr.set(space_.pack(Tuple().append("kvq").append("held")) + base, "");
  });
  PriorityQueue pq = make();
  pq.push("new", 4);
  auto kvs = db_->run(
      [&](Transaction& tr) { return tr.get_range(space_.key() + '\x0c', space_.key() + '\x1d'); });
  ASSERT_EQ(kvs.size(), 1u);
  EXPECT_GT(space_.unpack(kvs[0].key).get_int(1), 7);
  EXPECT_EQ(space_.unpack(kvs[0].key).get_int(1), detail::kFirstCountAfterUpgrade);
}

// A push whose counts would pass the largest int64 is refused with a clear error and writes
// nothing (the counter does not wrap around to counts that sort first).
TEST_P(PriorityQueueTest, PushesPastTheLargestCountAreRefused) {
  const std::string counter = space_.pack(Tuple().append("kvq").append("count"));
  db_->run([&](Transaction& tr) {
    tr.set(counter, common::encode_le64(std::numeric_limits<std::int64_t>::max() - 2));
  });
  PriorityQueue pq = make();
  try {
    pq.push_batch({{"a", 1}, {"b", 1}, {"c", 1}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternalError);
  }
  EXPECT_EQ(pq.size(), 0);
  pq.push_batch({{"a", 1}, {"b", 1}});  // the last two counts are still free
  EXPECT_EQ(pq.pop_min(), "a");
}

// Pushes of one priority made one after another in one transaction, through two objects, keep
// their order: each reads the push counter as the transaction's earlier pushes left it.
TEST_P(PriorityQueueTest, PushesInOneTransactionKeepTheirOrder) {
  PriorityQueue pq = make();
  PriorityQueue other = make();
  db_->run([&](Transaction& tr) {
    pq.push(tr, "first", 6);
    other.push(tr, "second", 6);
    pq.push_batch(tr, {{"third", 6}, {"fourth", 6}});
    other.push(tr, "fifth", 6);
  });
  pq.push("sixth", 6);
  for (const char* expected : {"first", "second", "third", "fourth", "fifth", "sixth"}) {
    EXPECT_EQ(pq.pop_min(), expected);
  }
}

TEST_P(PriorityQueueTest, ConcurrentPushesOfEqualPriorityDoNotConflict) {
  PriorityQueue pq = make();
  pq.push("existing", 4);
  Transaction a = db_->create_transaction();
  Transaction b = db_->create_transaction();
  pq.push(a, "a", 4);
  pq.push(b, "b", 4);
  a.commit();
  EXPECT_NO_THROW(b.commit());
  EXPECT_EQ(pq.size(), 3);
  EXPECT_EQ(pq.pop_min(), "existing");
}

INSTANTIATE_TEST_SUITE_P(Engines, PriorityQueueTest, ::testing::ValuesIn(testing::layer_params()),
                         testing::layer_param_name);

}  // namespace
}  // namespace kvq
