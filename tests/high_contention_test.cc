// Deterministic tests of the high-contention staging: a "phantom" popper's request is written
// directly in the documented key layout (docs/queues.md), so the order of requests is known.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "kvq/kvq.h"
#include "support/layer_fixture.h"

namespace kvq {
namespace {

using testing::LayerTest;

class HighContentionTest : public LayerTest {
 protected:
  Subspace control() const { return space_.subspace(Tuple().append("kvq")); }
  std::string slot_key(const std::string& id) const {
    return control().pack(Tuple().append("slot").append(Bytes(id)));
  }
  // Registers a pop request for `id` exactly as a popper does.
  void add_phantom_request(const std::string& id, std::int64_t side = 0) {
    db_->run([&](Transaction& tr) {
      tr.set_versionstamped_key(
          control().pack_with_versionstamp(Tuple().append("req").append(Versionstamp::incomplete())),
          Tuple().append(Bytes(id)).append(side).pack());
      std::string slot("\x00", 1);
      slot.append(10, '\0');
      slot.append("\x01\x00\x00\x00", 4);
      tr.set_versionstamped_value(slot_key(id), slot);
      tr.atomic_add(control().pack(Tuple().append("waiting")), std::int64_t{1});
    });
  }
  void hold_lease(std::chrono::milliseconds for_how_long) {
    const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
    db_->run([&](Transaction& tr) {
      tr.set(control().pack(Tuple().append("lease")),
             Tuple().append(Bytes("someone-else")).append(now + for_how_long.count()).pack());
    });
  }
  void release_lease() {
    db_->run([&](Transaction& tr) { tr.clear(control().pack(Tuple().append("lease"))); });
  }
  std::optional<std::string> get(const std::string& key) {
    return db_->run([&](Transaction& tr) { return tr.get(key); });
  }
};

TEST_P(HighContentionTest, TimedOutPopLeavesItemInQueueAndWithdrawsItsRequest) {
  QueueOptions o;
  o.high_contention = true;
  Queue q(db_, space_, o);
  q.push("item");
  add_phantom_request(std::string(20, 'P'));
  hold_lease(std::chrono::minutes(1));
  const auto t0 = std::chrono::steady_clock::now();
  try {
    q.pop(std::chrono::milliseconds(100));
    FAIL() << "expected timed_out";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimedOut);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(q.size(), 1);
  EXPECT_EQ(q.peek(), "item");
  // Only the phantom's request is left.
  auto reqs = db_->run([&](Transaction& tr) {
    KeyRange r = control().range(Tuple().append("req"));
    return tr.get_range(r.begin, r.end);
  });
  EXPECT_EQ(reqs.size(), 1u);
}

TEST_P(HighContentionTest, NewPopDoesNotOvertakeWaitingRequest) {
  QueueOptions o;
  o.high_contention = true;
  Queue q(db_, space_, o);
  q.push("first");
  const std::string phantom(20, 'P');
  add_phantom_request(phantom);
  // The new pop finds a request waiting, queues behind it, fulfils both in order: the phantom gets
  // the only item, the new pop finds the queue empty.
  EXPECT_EQ(q.pop(), std::nullopt);
  EXPECT_EQ(get(slot_key(phantom)), std::string("\x01") + "first");
  EXPECT_EQ(q.size(), 0);
}

TEST_P(HighContentionTest, ComposedPopServesWaitingRequestsFirst) {
  PriorityQueueOptions o;
  o.high_contention = true;
  PriorityQueue pq(db_, space_, o);
  pq.push("low", 1);
  pq.push("high", 9);
  pq.push("mid", 5);
  const std::string phantom(20, 'M');
  add_phantom_request(phantom, /*side=max*/ 1);
  auto got = db_->run([&](Transaction& tr) { return pq.pop_max(tr); });
  EXPECT_EQ(got, "mid");
  EXPECT_EQ(get(slot_key(phantom)), std::string("\x01") + "high");
  EXPECT_EQ(pq.size(), 1);
  EXPECT_EQ(pq.pop_min(), "low");
}

TEST_P(HighContentionTest, WaiterTakesOverFromVanishedFulfillerAfterLease) {
  QueueOptions o;
  o.high_contention = true;
  o.contention.lease = std::chrono::milliseconds(50);
  Queue q(db_, space_, o);
  q.push("a");
  q.push("b");
  add_phantom_request(std::string(20, 'P'));
  hold_lease(std::chrono::milliseconds(200));  // a fulfiller that died
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(q.pop(), "b");  // the phantom's older request got "a"
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(q.size(), 0);
}

TEST_P(HighContentionTest, ClearAnswersWaitingRequestsWithEmpty) {
  QueueOptions o;
  o.high_contention = true;
  Queue q(db_, space_, o);
  q.push("x");
  const std::string phantom(20, 'P');
  add_phantom_request(phantom);
  q.clear();
  EXPECT_EQ(get(slot_key(phantom)), std::string("\x02", 1));
  EXPECT_EQ(q.size(), 0);
  EXPECT_EQ(q.pop(), std::nullopt);
}

std::vector<testing::LayerParam> hc_only() {
  std::vector<testing::LayerParam> out;
  for (const auto& p : testing::layer_params()) {
    if (p.high_contention) out.push_back(p);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Engines, HighContentionTest, ::testing::ValuesIn(hc_only()),
                         testing::layer_param_name);

}  // namespace
}  // namespace kvq
