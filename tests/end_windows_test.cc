// Reads at the ends of the items look in a window next to where the same object's last read found
// its items (src/layers/contention/end_windows.h). These tests make that hint wrong in every way
// it can be (another object moved the end far away; an item came back below it; a better priority
// arrived outside the window; the queue emptied) and check that pops, takes, peeks and pushes
// still see exactly what one read of the whole range would, on every engine.
#include "layers/contention/end_windows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kvq/kvq.h"
#include "layers/item_keys.h"
#include "support/layer_fixture.h"

namespace kvq {
namespace {

using std::chrono::milliseconds;
using testing::LayerTest;
constexpr contention::Side kFront = contention::Side::kFront;

class EndWindowsTest : public LayerTest {
 protected:
  QueueOptions options() const {
    QueueOptions o;
    o.high_contention = hc();
    return o;
  }
  // Far more items than one window holds (128 positions).
  static constexpr int kFar = 600;

  static std::vector<std::string> numbered(int from, int n) {
    std::vector<std::string> out;
    for (int i = from; i < from + n; ++i) out.push_back("v" + std::to_string(i));
    return out;
  }
  // Pushes `values` in batches small enough for etcd's --max-txn-ops.
  static void push_all(Queue& q, const std::vector<std::string>& values) {
    for (std::size_t i = 0; i < values.size(); i += kChunk) {
      const std::size_t n = std::min(kChunk, values.size() - i);
      q.push_batch(std::vector<std::string>(values.begin() + i, values.begin() + i + n));
    }
  }
  static void push_all(PriorityQueue& pq, std::int64_t priority, int n, const std::string& tag) {
    for (int i = 0; i < n; i += static_cast<int>(kChunk)) {
      std::vector<std::pair<std::string, std::int64_t>> items;
      for (int k = i; k < std::min(n, i + static_cast<int>(kChunk)); ++k) {
        items.emplace_back(tag + std::to_string(k), priority);
      }
      pq.push_batch(items);
    }
  }
  // Pops `n` items (batches may be cut to the engine's limits).
  static std::vector<std::string> pop_n(Queue& q, std::size_t n) {
    std::vector<std::string> out;
    while (out.size() < n) {
      auto part = q.pop_batch(n - out.size());
      if (part.empty()) break;
      out.insert(out.end(), part.begin(), part.end());
    }
    return out;
  }
  static std::size_t pop_min_n(PriorityQueue& pq, std::size_t n) {
    std::size_t popped = 0;
    while (popped < n) {
      const std::size_t got = pq.pop_min_batch(n - popped).size();
      if (got == 0) break;
      popped += got;
    }
    return popped;
  }
  static constexpr std::size_t kChunk = 50;
};

TEST_P(EndWindowsTest, APopAfterAnotherObjectMovedTheFrontFarAwayGetsTheFront) {
  Queue mine(db_, space_, options());
  Queue other(db_, space_, options());
  push_all(mine, numbered(0, kFar + 10));
  EXPECT_EQ(mine.pop(), "v0");  // mine's hint: the front at position 1
  EXPECT_EQ(pop_n(other, kFar).size(), static_cast<std::size_t>(kFar));
  EXPECT_EQ(mine.pop(), "v" + std::to_string(kFar + 1));
  EXPECT_EQ(mine.peek(), "v" + std::to_string(kFar + 2));
}

TEST_P(EndWindowsTest, AnItemComingBackBelowTheHintIsPoppedFirst) {
  Queue q(db_, space_, options());
  push_all(q, numbered(0, 300));
  auto lease = q.take(milliseconds(60'000));
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->value, "v0");
  EXPECT_EQ(pop_n(q, 250).size(), 250u);  // the hint is now far past v0's place
  q.nack(*lease);                         // v0 back at its own place, at the front
  EXPECT_EQ(q.pop(), "v0");
  EXPECT_EQ(q.pop(), "v251");
}

TEST_P(EndWindowsTest, PushesAfterAnotherObjectPushedFarAheadKeepFifo) {
  Queue mine(db_, space_, options());
  Queue other(db_, space_, options());
  mine.push("first");  // mine's tail hint: position 1
  push_all(other, numbered(0, kFar));
  mine.push("last");
  EXPECT_EQ(mine.pop(), "first");
  std::vector<std::string> rest = pop_n(mine, kFar + 1);
  ASSERT_EQ(rest.size(), static_cast<std::size_t>(kFar + 1));
  EXPECT_EQ(rest.front(), "v0");
  EXPECT_EQ(rest.back(), "last");
}

TEST_P(EndWindowsTest, AnEmptiedQueueReadsEmptyAndRefillsInOrder) {
  Queue q(db_, space_, options());
  push_all(q, numbered(0, 200));
  EXPECT_EQ(pop_n(q, 200).size(), 200u);
  EXPECT_EQ(q.pop(), std::nullopt);
  q.push("again");
  q.push("and again");
  EXPECT_EQ(q.pop(), "again");
  EXPECT_EQ(q.pop(), "and again");
}

TEST_P(EndWindowsTest, PriorityEndsOutsideTheWindowsAreFound) {
  PriorityQueue pq(db_, space_, options());
  push_all(pq, 5, kFar, "p5-");
  EXPECT_EQ(pq.pop_min(), "p5-0");                            // front hint: (5, 1)
  EXPECT_EQ(pq.pop_max(), "p5-" + std::to_string(kFar - 1));  // back hint: (5, kFar - 1)
  pq.push("p9", 9);  // above the back window's start: in it
  pq.push("p1", 1);  // below the front window's end: in it
  EXPECT_EQ(pq.pop_max(), "p9");
  EXPECT_EQ(pq.pop_min(), "p1");
  PriorityQueue other(db_, space_, options());
  EXPECT_EQ(pop_min_n(other, kFar - 10), static_cast<std::size_t>(kFar - 10));
  // Both hints now point at items gone: what is left is far from the front hint.
  std::vector<std::string> rest;
  while (auto v = pq.pop_min()) rest.push_back(*v);
  ASSERT_EQ(rest.size(), 8u);
  EXPECT_EQ(rest.front(), "p5-" + std::to_string(kFar - 10 + 1));
  EXPECT_EQ(rest.back(), "p5-" + std::to_string(kFar - 2));
}

TEST_P(EndWindowsTest, PriorityPushesAfterAnotherObjectPushedFarAheadKeepFifo) {
  PriorityQueue mine(db_, space_, options());
  PriorityQueue other(db_, space_, options());
  mine.push("first", 3);  // mine's tail hint for priority 3
  push_all(other, 3, kFar, "v");
  mine.push("last", 3);
  EXPECT_EQ(mine.pop_min(), "first");
  EXPECT_EQ(mine.pop_max(), "last");
}

// A PriorityQueue's counts come from one push counter for all its priorities, so the items of one
// priority are spread out (here 300 positions apart: a window of 128 positions past the last item
// found, widened to a multiple of 128, would never hold the next). A window learns how far apart
// they are (the stride): after a few reads it holds the next item, and reads stop going on to the
// rest of the range (on etcd, a read of every key of it). Only the first read of each priority has
// to. Reads that find the same item again (peeks, here three per pop) say nothing of the gaps.
TEST_P(EndWindowsTest, WindowsOverSpreadOutItemsOfOnePriorityLearnToHoldTheNextItem) {
  constexpr int kPriorities = 300, kPerPriority = 2, kWarmUp = 8;
  PriorityQueue pq(db_, space_, options());
  std::vector<std::pair<std::string, std::int64_t>> all;
  for (int i = 0; i < kPriorities * kPerPriority; ++i) {
    all.emplace_back("v" + std::to_string(i), i % kPriorities);  // round robin
  }
  for (std::size_t i = 0; i < all.size(); i += kChunk) {
    pq.push_batch({all.begin() + static_cast<std::ptrdiff_t>(i),
                   all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), i + kChunk))});
  }
  const contention::ItemRange items = detail::item_range_of(space_, /*prioritized=*/true);
  std::optional<std::int64_t> priority;  // of the last item read
  int popped = 0, beyond_window_in_a_priority = 0;
  for (bool empty = false; !empty;) {
    db_->run([&](Transaction& tr) {
      const contention::OwnedRead window = contention::first_end_read(items, kFront, 1, true);
      const bool in_window = !tr.get_range(window.begin, window.end, window.options).empty();
      const std::vector<KeyValue> got = contention::read_end(tr, items, kFront, 1, false);
      empty = got.empty();
      if (empty) return;
      for (int peek = 0; peek < 3; ++peek) {
        ASSERT_EQ(contention::read_end(tr, items, kFront, 1, true), got);
      }
      const std::int64_t p = detail::parse_item_key(space_, got[0].key, true).priority;
      if (!in_window && priority == p) ++beyond_window_in_a_priority;
      priority = p;
      ++popped;
      tr.clear(got[0].key);
    });
  }
  EXPECT_EQ(popped, kPriorities * kPerPriority);
  EXPECT_LE(beyond_window_in_a_priority, kWarmUp);
}

// Pushes move the back past its hint between two pop_max reads: that jump is not a gap between
// items, so the back's window stays as narrow as its priority's items are dense (a few hundred
// positions here, where counting the jumps made it span the whole priority).
TEST_P(EndWindowsTest, PushesPastTheBackDoNotWidenItsWindow) {
  constexpr int kItems = 1000, kRounds = 30, kPushesPerRound = 20, kMostInWindow = 300;
  PriorityQueue pq(db_, space_, options());
  push_all(pq, 5, kItems, "v");
  const contention::ItemRange items = detail::item_range_of(space_, /*prioritized=*/true);
  constexpr contention::Side kBack = contention::Side::kBack;
  for (int round = 0; round < kRounds; ++round) {
    push_all(pq, 5, kPushesPerRound, "r" + std::to_string(round) + "-");
    db_->run([&](Transaction& tr) {
      const std::vector<KeyValue> got = contention::read_end(tr, items, kBack, 1, false);
      ASSERT_EQ(got.size(), 1u);
      tr.clear(got[0].key);
    });
  }
  const contention::OwnedRead window = contention::first_end_read(items, kBack, 1, true);
  const std::size_t in_window = db_->run([&](Transaction& tr) {
    return tr.get_range(window.begin, window.end, {.snapshot = true}).size();
  });
  EXPECT_LE(in_window, static_cast<std::size_t>(kMostInWindow));
}

// read_ends reads the ends of several item ranges together (two get_ranges): it returns what
// read_end of each returns, windows found short or not. The ranges' keys are short (a subspace of
// a few bytes), so the window bounds it builds are short strings, which must stay where its reads
// view them (a sanitizer build catches reads of moved ones).
TEST_P(EndWindowsTest, ReadEndsOfSeveralRangesReturnWhatReadEndOfEachReturns) {
  constexpr int kRanges = 6;
  const auto tag = static_cast<std::int64_t>(std::random_device{}() & 0xffff);
  std::vector<contention::ItemRange> ranges;
  for (int i = 0; i < kRanges; ++i) {
    const Subspace space(Tuple().append(tag).append(i));
    Queue q(db_, space);
    push_all(q, numbered(0, 300));
    ranges.push_back(detail::item_range_of(space, /*prioritized=*/false));
    // A front hint at the first item, then the front moved by another object: within the window
    // for even ranges, past it (the window reads short) for odd ones, all of it for the last.
    db_->run([&](Transaction& tr) { contention::read_end(tr, ranges.back(), kFront, 1, true); });
    pop_n(q, i == kRanges - 1 ? 300 : i % 2 == 0 ? 100 : 280);
  }
  std::vector<const contention::ItemRange*> items;
  for (const contention::ItemRange& r : ranges) items.push_back(&r);
  db_->run([&](Transaction& tr) {
    const std::vector<std::vector<KeyValue>> got =
        contention::read_ends(tr, items, kFront, 2, /*snapshot=*/true);
    ASSERT_EQ(got.size(), ranges.size());
    for (int i = 0; i < kRanges; ++i) {
      const contention::ItemRange& r = ranges[static_cast<std::size_t>(i)];
      EXPECT_EQ(got[static_cast<std::size_t>(i)],
                tr.get_range(r.begin, r.end, {.limit = 2, .snapshot = true}))
          << "range " << i;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Engines, EndWindowsTest, ::testing::ValuesIn(testing::layer_params()),
                         testing::layer_param_name);

}  // namespace
}  // namespace kvq
