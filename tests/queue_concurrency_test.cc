// Real threads on one shared Queue / PriorityQueue; the whole history is checked afterwards with
// tools/kvq/history.h (no loss, no duplicate, FIFO and priority promises, no wrong "empty").
// Sizes: KVQ_TEST_ITEMS (default 50,000 items in total per test; 8,000 in sanitizer builds) and
// KVQ_TEST_CLIENTS (default 16).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "kvq/kvq.h"
#include "support/figures.h"
#include "support/layer_fixture.h"
#include "support/producers_consumers.h"
#include "tools/kvq/history.h"

namespace kvq {
namespace {

using history::flatten;
using history::now_ns;

using testing::env_int;
using testing::LayerTest;

class ConcurrencyTest : public LayerTest {
 protected:
  int items() const { return testing::history_items(GetParam().engine); }
  int clients() const { return static_cast<int>(env_int("KVQ_TEST_CLIENTS", 16)); }
};

void expect_ok(const history::Result& r) {
  EXPECT_TRUE(r.ok) << r.violations << " violations";
  for (const auto& p : r.problems) ADD_FAILURE() << p;
}

// Half the clients push (each its own numbered sequence), half pop; all pops are recorded.
TEST_P(ConcurrencyTest, QueueProducersAndConsumersLoseNothingAndKeepFifo) {
  QueueOptions o;
  o.high_contention = hc();
  Queue q(db_, space_, o);
  const int n = items(), c = clients();
  const testing::History h = testing::run_producers_and_consumers({
      .producers = c / 2,
      .consumers = c - c / 2,
      .items = n,
      .push = [&](const history::Push& p) { q.push(p.value); },
      .pop = [&](int, int) { return testing::PopOutcome{.value = q.pop()}; },
  });
  EXPECT_EQ(q.size(), 0);
  auto r = history::check(h.pushes, h.pops);
  testing::record_history(r);
  EXPECT_EQ(r.popped, n);
  expect_ok(r);
}

// Every client mixes pushes (random priorities), pop_min and pop_max; then one thread drains.
TEST_P(ConcurrencyTest, PriorityQueueMixedClientsLoseNothingAndKeepPriorityOrder) {
  PriorityQueueOptions o;
  o.high_contention = hc();
  PriorityQueue pq(db_, space_, o);
  const int n = items(), c = clients();
  std::vector<std::vector<history::Push>> pushes(c);
  std::vector<std::vector<history::Pop>> pops(c + 1);
  std::vector<std::thread> threads;
  for (int k = 0; k < c; ++k) {
    threads.emplace_back([&, k] {
      std::mt19937 gen(static_cast<unsigned>(k + 17));
      int next = k;
      while (next < n) {
        int dice = static_cast<int>(gen() % 4);
        if (dice < 2) {  // push
          history::Push h{std::to_string(next), static_cast<std::int64_t>(gen() % 50), now_ns(), 0};
          pq.push(h.value, h.priority);
          h.end = now_ns();
          pushes[k].push_back(std::move(h));
          next += c;
        } else {
          const bool min = dice == 2;
          history::Pop h{min ? history::PopKind::kMin : history::PopKind::kMax, std::nullopt,
                         now_ns(), 0};
          h.value = min ? pq.pop_min() : pq.pop_max();
          h.end = now_ns();
          pops[k].push_back(std::move(h));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (;;) {
    history::Pop h{history::PopKind::kMin, std::nullopt, now_ns(), 0};
    h.value = pq.pop_min();
    h.end = now_ns();
    const bool empty = !h.value;
    pops[c].push_back(std::move(h));
    if (empty) break;
  }
  EXPECT_EQ(pq.size(), 0);
  auto r = history::check(flatten(pushes), flatten(pops));
  testing::record_history(r);
  EXPECT_EQ(r.pushed, n);
  EXPECT_EQ(r.popped, n);
  expect_ok(r);
}

INSTANTIATE_TEST_SUITE_P(Engines, ConcurrencyTest, ::testing::ValuesIn(testing::layer_params()),
                         testing::layer_param_name);

// Poppers with very short timeouts under contention: a timed-out pop either returned its item or
// left it in the queue. Everything pushed is popped exactly once in the end.
class TimeoutTest : public LayerTest {};

TEST_P(TimeoutTest, PoppersTimingOutUnderContentionLoseNothing) {
  PriorityQueueOptions o;
  o.high_contention = true;
  PriorityQueue pq(db_, space_, o);
  const int n = GetParam().engine == "etcd"
                    ? static_cast<int>(env_int("KVQ_TEST_ETCD_ITEMS", 1500) / 5)
                    : static_cast<int>(testing::test_items() / 5);
  const int poppers = static_cast<int>(env_int("KVQ_TEST_CLIENTS", 16));
  // A high-contention pop on etcd takes several round trips of ~1 ms each: scaled, the timeouts
  // (30-90 ms there) let most pops finish and a third to a half time out.
  const int scale = GetParam().engine == "etcd" ? 30 : 1;
  std::vector<std::mt19937> gens;
  for (int k = 0; k < poppers; ++k) gens.emplace_back(static_cast<unsigned>(k));
  std::atomic<long> timeouts{0};
  const testing::History h = testing::run_producers_and_consumers({
      .producers = 4,
      .consumers = poppers,
      .items = n,
      .priority_of = [](int i) { return std::int64_t{i % 7}; },
      .push = [&](const history::Push& p) { pq.push(p.value, p.priority); },
      .pop =
          [&](int c, int) {
            std::mt19937& gen = gens[static_cast<std::size_t>(c)];
            const bool min = gen() % 2 == 0;
            const auto timeout = std::chrono::milliseconds(scale * static_cast<int>(1 + gen() % 3));
            try {
              return testing::PopOutcome{min ? history::PopKind::kMin : history::PopKind::kMax,
                                         min ? pq.pop_min(timeout) : pq.pop_max(timeout)};
            } catch (const Error& e) {
              EXPECT_EQ(e.code(), ErrorCode::kTimedOut) << e.what();
              ++timeouts;
              return testing::PopOutcome{.answered = false};  // its item must still be queued
            }
          },
  });
  std::vector<std::string> left;
  while (auto v = pq.pop_min()) left.push_back(*v);
  auto r = history::check(h.pushes, h.pops, left);
  testing::record_history(r);
  EXPECT_EQ(r.popped + r.remaining, n);
  expect_ok(r);
  EXPECT_GT(timeouts.load(), 0) << "no pop timed out: the case this test is for did not happen";
  RecordProperty("timeouts", static_cast<int>(timeouts.load()));
  std::printf("timeouts: %ld of %d items\n", timeouts.load(), n);
}

std::vector<testing::LayerParam> hc_only() {
  std::vector<testing::LayerParam> out;
  for (const auto& p : testing::layer_params()) {
    if (p.high_contention) out.push_back(p);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Engines, TimeoutTest, ::testing::ValuesIn(hc_only()),
                         testing::layer_param_name);

}  // namespace
}  // namespace kvq
