#include "kvq/queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <string>

#include "kvq/kvq.h"
#include "support/layer_fixture.h"

namespace kvq {
namespace {

using testing::LayerTest;

class QueueTest : public LayerTest {
 protected:
  Queue make(QueueOptions o = {}) {
    o.high_contention = hc();
    return Queue(db_, space_, o);
  }
};

TEST_P(QueueTest, PopsInPushOrder) {
  Queue q = make();
  for (int i = 0; i < 20; ++i) q.push("v" + std::to_string(i));
  for (int i = 0; i < 20; ++i) EXPECT_EQ(q.pop(), "v" + std::to_string(i));
  EXPECT_EQ(q.pop(), std::nullopt);
}

TEST_P(QueueTest, EmptyQueuePopAndPeekReturnNullopt) {
  Queue q = make();
  EXPECT_EQ(q.pop(), std::nullopt);
  EXPECT_EQ(q.peek(), std::nullopt);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.size(), 0);
}

TEST_P(QueueTest, PeekReturnsFrontWithoutRemoving) {
  Queue q = make();
  q.push("a");
  q.push("b");
  EXPECT_EQ(q.peek(), "a");
  EXPECT_EQ(q.peek(), "a");
  EXPECT_EQ(q.size(), 2);
  EXPECT_EQ(q.pop(), "a");
  EXPECT_EQ(q.peek(), "b");
}

TEST_P(QueueTest, SizeCountsPushesAndPops) {
  Queue q = make();
  for (int i = 0; i < 7; ++i) q.push("x");
  EXPECT_EQ(q.size(), 7);
  q.pop();
  q.pop();
  EXPECT_EQ(q.size(), 5);
  EXPECT_FALSE(q.empty());
}

TEST_P(QueueTest, ClearRemovesEverythingAndResetsSize) {
  Queue q = make();
  for (int i = 0; i < 5; ++i) q.push("x");
  q.clear();
  EXPECT_EQ(q.size(), 0);
  EXPECT_EQ(q.pop(), std::nullopt);
  q.push("after");
  EXPECT_EQ(q.size(), 1);
  EXPECT_EQ(q.pop(), "after");
}

TEST_P(QueueTest, ValuesAreArbitraryBytes) {
  Queue q = make();
  std::string zero("\x00\xff\x01\x00", 4);
  std::string big(kMaxValueSize, '\xab');
  q.push(zero);
  q.push("");
  q.push(big);
  EXPECT_EQ(q.pop(), zero);
  EXPECT_EQ(q.pop(), "");
  EXPECT_EQ(q.pop(), big);
}

TEST_P(QueueTest, ValueOverLimitThrowsValueTooLargeAndInsertsNothing) {
  Queue q = make();
  try {
    q.push(std::string(kMaxValueSize + 1, 'x'));
    FAIL() << "expected value_too_large";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kValueTooLarge);
  }
  EXPECT_EQ(q.size(), 0);
  EXPECT_EQ(q.pop(), std::nullopt);
}

TEST_P(QueueTest, OperationsComposeInOneTransaction) {
  Queue q = make();
  Queue other(db_, space_.subspace(Tuple().append("other")), {});
  q.push("first");
  auto popped = db_->run([&](Transaction& tr) {
    q.push(tr, "second");
    other.push(tr, "moved");
    tr.set(space_.pack(Tuple().append("mine")), "1");
    return q.pop(tr);
  });
  EXPECT_EQ(popped, "first");
  EXPECT_EQ(q.size(), 1);
  EXPECT_EQ(other.size(), 1);
  EXPECT_EQ(q.pop(), "second");
}

TEST_P(QueueTest, AbandonedTransactionChangesNothing) {
  Queue q = make();
  q.push("keep");
  {
    Transaction tr = db_->create_transaction();
    q.push(tr, "ghost");
    EXPECT_EQ(q.pop(tr), "keep");
    EXPECT_EQ(q.size(tr), 1);  // read-your-writes: +1 -1
  }
  EXPECT_EQ(q.size(), 1);
  EXPECT_EQ(q.pop(), "keep");
  EXPECT_EQ(q.pop(), std::nullopt);
}

TEST_P(QueueTest, KeyLayoutIsIndexThenTwentyRandomBytes) {
  Queue q = make();
  q.push("a");
  q.push("b");
  auto kvs = db_->run(
      [&](Transaction& tr) { return tr.get_range(space_.key() + '\x0c', space_.key() + '\x1d'); });
  ASSERT_EQ(kvs.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    Tuple t = space_.unpack(kvs[i].key);
    ASSERT_EQ(t.size(), 2u);
    EXPECT_EQ(t.get_int(0), i + 1);
    EXPECT_EQ(t.get_bytes(1).data.size(), 20u);
  }
  EXPECT_EQ(kvs[0].value, "a");
  EXPECT_EQ(kvs[1].value, "b");
}

TEST_P(QueueTest, ConcurrentPushTransactionsDoNotConflict) {
  Queue q = make();
  q.push("existing");
  Transaction a = db_->create_transaction();
  Transaction b = db_->create_transaction();
  q.push(a, "from-a");
  q.push(b, "from-b");
  a.commit();
  EXPECT_NO_THROW(b.commit());
  EXPECT_EQ(q.size(), 3);
}

TEST_P(QueueTest, ConcurrentPopTransactionsConflict) {
  Queue q = make();
  q.push("only");
  Transaction a = db_->create_transaction();
  Transaction b = db_->create_transaction();
  EXPECT_EQ(q.pop(a), "only");
  EXPECT_EQ(q.pop(b), "only");
  a.commit();
  try {
    b.commit();
    FAIL() << "expected not_committed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotCommitted);
  }
}

TEST_P(QueueTest, QueuesInDifferentSubspacesAreIndependent) {
  Queue q = make();
  Queue r(db_, space_.subspace(Tuple().append("r")), {});
  q.push("q1");
  r.push("r1");
  EXPECT_EQ(r.pop(), "r1");
  EXPECT_EQ(r.pop(), std::nullopt);
  EXPECT_EQ(q.pop(), "q1");
}

TEST_P(QueueTest, InvalidOptionsThrowInvalidOptionValue) {
  QueueOptions o;
  o.contention.batch_size = 0;
  EXPECT_THROW(Queue(db_, space_, o), Error);
  // Out of range high: every staged pop failed (batch_size + 1 overflowed; found by review in
  // session 31), and durations this long overflow the clock values they are added to.
  const auto refused = [&](const HighContentionOptions& c) {
    QueueOptions with = {};
    with.high_contention = true;
    with.contention = c;
    try {
      Queue(db_, space_, with);
    } catch (const Error& e) {
      return e.code() == ErrorCode::kInvalidOptionValue;
    }
    return false;
  };
  EXPECT_TRUE(refused({.batch_size = std::numeric_limits<int>::max()}));
  EXPECT_TRUE(refused({.lease = std::chrono::milliseconds::max()}));
  EXPECT_TRUE(refused({.request_ttl = kMaxWorkDuration + std::chrono::milliseconds(1)}));
  EXPECT_FALSE(refused({.batch_size = 100'000, .request_ttl = kMaxWorkDuration}));
  QueueOptions p;
  p.pop_timeout = std::chrono::milliseconds(-1);
  try {
    Queue(db_, space_, p);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidOptionValue);
  }
}

// A pop's timeout means the same in every mode: a negative one is refused before anything, and one
// longer than a transaction may have (about 24.8 days) is no timeout. Plain pops refused the long
// ones (every pop of a queue built with pop_timeout = 1000 h threw) and took a negative one in
// high-contention and combining modes.
TEST_P(QueueTest, PopTimeoutsMeanTheSameInEveryMode) {
  for (const auto& [hc, combine] : {std::pair{false, false}, {true, false}, {false, true}}) {
    SCOPED_TRACE(std::string("high_contention ") + (hc ? "on" : "off") + ", combine " +
                 (combine ? "on" : "off"));
    QueueOptions o;
    o.high_contention = hc;
    o.combine = combine;
    o.pop_timeout = std::chrono::hours(1000);
    Queue q(db_, space_, o);
    q.push("a");
    q.push("b");
    EXPECT_EQ(q.pop(), "a");
    EXPECT_EQ(q.pop(std::chrono::milliseconds::max()), "b");
    q.push("c");
    try {
      q.pop(std::chrono::milliseconds(-1));
      ADD_FAILURE() << "a negative timeout was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidOptionValue);
    }
    EXPECT_EQ(q.pop(), "c") << "the refused pop took it";
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, QueueTest, ::testing::ValuesIn(testing::layer_params()),
                         testing::layer_param_name);

}  // namespace
}  // namespace kvq
