// Deterministic tests of the high-contention staging: a "phantom" popper's request is written
// directly in the documented key layout (docs/queues.md), so the order of requests is known.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

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
      tr.set_versionstamped_key(control().pack_with_versionstamp(
                                    Tuple().append("req").append(Versionstamp::incomplete())),
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
  // The item delivered to `id`'s slot (docs/queues.md: \x01 + le32 key length + key + value, or
  // \x04 + key with the value in res), "<empty>" for \x02, "<waiting>" otherwise.
  std::string delivered(const std::string& id) {
    auto s = get(slot_key(id));
    if (!s || s->empty()) return "<absent>";
    if ((*s)[0] == '\x02') return "<empty>";
    if ((*s)[0] == '\x04')
      return get(control().pack(Tuple().append("res").append(Bytes(id)))).value_or("?");
    if ((*s)[0] != '\x01' || s->size() < 5) return "<waiting>";
    std::uint32_t n = 0;
    for (int i = 0; i < 4; ++i)
      n |= static_cast<std::uint32_t>(static_cast<unsigned char>((*s)[1 + i])) << (8 * i);
    return s->substr(5 + n);
  }
  // `n` phantom requests with ids "phantom-<i>" padded to 20 bytes, registered in order, a few
  // per transaction (etcd bounds the operations of one).
  std::vector<std::string> add_phantoms(int n, std::int64_t side = 0) {
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) {
      std::string id = "phantom-" + std::to_string(100000 + i);
      id.resize(20, '.');
      add_phantom_request(id, side);
      ids.push_back(id);
    }
    return ids;
  }
  std::int64_t count(const char* kind) {
    return db_->run([&](Transaction& tr) {
      KeyRange r = control().range(Tuple().append(kind));
      return static_cast<std::int64_t>(tr.get_range(r.begin, r.end).size());
    });
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
  EXPECT_EQ(delivered(phantom), "first");
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
  EXPECT_EQ(delivered(phantom), "high");
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
  EXPECT_EQ(delivered(phantom), "<empty>");
  EXPECT_EQ(q.size(), 0);
  EXPECT_EQ(q.pop(), std::nullopt);
}

// Issue 16, defect 1: 160 waiting requests used to be served in batches of 128, which outgrew
// etcd's --max-txn-ops (about 5 compares per request): every pop failed. Batches now stop at the
// engine's limits; every request is served, in order.
TEST_P(HighContentionTest, ManyWaitingRequestsAreServedInOrderWithinTheEngineLimits) {
  QueueOptions o;
  o.high_contention = true;
  Queue q(db_, space_, o);
  auto ids = add_phantoms(160);
  for (int i = 0; i < 161; ++i) q.push("item-" + std::to_string(i));
  EXPECT_EQ(q.pop(), "item-160");  // behind every phantom
  for (int i = 0; i < 160; ++i)
    EXPECT_EQ(delivered(ids[static_cast<std::size_t>(i)]), "item-" + std::to_string(i));
  EXPECT_EQ(q.size(), 0);
  EXPECT_EQ(count("req"), 0);
}

// Issue 16, defect 1 (bytes): 120 requests for 99,000-byte items used to make one 12 MB batch
// (transaction_too_large on every engine). Batches now stop at Database::limits().max_bytes.
TEST_P(HighContentionTest, RequestsForLargeItemsAreServedWithinTheByteLimit) {
  PriorityQueueOptions o;
  o.high_contention = true;
  PriorityQueue pq(db_, space_, o);
  auto ids = add_phantoms(120, /*side=max*/ 1);
  auto big = [](int i) {
    std::string v = "big-" + std::to_string(1000 + i);
    v.resize(99'000, static_cast<char>('a' + i % 26));
    return v;
  };
  for (int i = 0; i < 121; ++i) pq.push(big(i), /*priority=*/i);
  EXPECT_EQ(pq.pop_min(), big(0));  // every phantom asked for the max: newest priorities first
  for (int i = 0; i < 120; ++i)
    EXPECT_EQ(delivered(ids[static_cast<std::size_t>(i)]), big(120 - i)) << i;
  EXPECT_EQ(pq.size(), 0);
  EXPECT_EQ(count("req"), 0);
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
