// Pushes and pops through an engine that injects commit_unknown_result, both for commits it did
// not apply and for commits it did apply. Items must be neither duplicated (a retried push) nor
// lost (a retried pop whose first attempt took an item), also when a pushed item was popped by
// another client before the push's retry ran. The ShortTtl cases make high-contention requests
// outlive their request_ttl while their commits are retried (40 ms ttl, 5 ms per commit, 12
// poppers): fulfillers then expire requests and put deliveries back under the feet of poppers
// whose consuming commit ended in commit_unknown_result. Those cases check exactly-once only.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "engine/testing/fault_injection.h"
#include "kvq/kvq.h"
#include "support/figures.h"
#include "support/layer_engines.h"
#include "tools/kvq/history.h"

namespace kvq {
namespace {

using history::now_ns;

struct FaultParam {
  bool priority;
  bool high_contention;
  bool short_request_ttl = false;
};

class FaultTest : public ::testing::TestWithParam<FaultParam> {};

TEST_P(FaultTest, RetriesAfterUnknownResultNeitherDuplicateNorLoseItems) {
  auto base = kvq::open("memory:");
  engine::FaultInjectionOptions fo;
  fo.unknown_not_applied = 0.1;
  fo.unknown_applied = 0.1;
  fo.seed = 12345;
  if (GetParam().short_request_ttl) fo.commit_delay = std::chrono::milliseconds(5);
  auto faulty = std::make_shared<engine::FaultInjectionEngine>(base->engine(), fo);
  auto db = std::make_shared<Database>(faulty, "faulty-memory:");
  Subspace space(Tuple().append("fault"));
  QueueOptions qo;
  qo.high_contention = GetParam().high_contention;
  if (GetParam().short_request_ttl) qo.contention.request_ttl = std::chrono::milliseconds(40);
  PriorityQueueOptions po;
  po.high_contention = GetParam().high_contention;
  po.contention = qo.contention;
  Queue q(db, space, qo);
  PriorityQueue pq(db, space, po);
  const bool prio = GetParam().priority;
  // Deliveries put back from expired requests come back behind later pops (docs/queues.md, "Every
  // way out of a pop withdraws its request"): with a short ttl only exactly-once is promised.
  const bool unordered = GetParam().short_request_ttl;

  const int n = static_cast<int>(testing::test_items() / 10);
  const int producers = 4, consumers = GetParam().short_request_ttl ? 12 : 4;
  std::vector<std::vector<history::Push>> pushes(producers);
  std::vector<std::vector<history::Pop>> pops(consumers + 1);
  std::atomic<int> producing{producers};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = p; i < n; i += producers) {
        history::Push h{std::to_string(i), i % 5, now_ns(), 0};
        if (prio) {
          pq.push(h.value, h.priority);
        } else {
          q.push(h.value);
        }
        h.end = now_ns();
        pushes[p].push_back(std::move(h));
      }
      --producing;
    });
  }
  for (int c = 0; c < consumers; ++c) {
    threads.emplace_back([&, c] {
      int empties = 0;
      for (int k = 0; empties < 2; ++k) {
        const bool done = producing.load() == 0;
        history::Pop h{unordered ? history::PopKind::kAny
                       : prio    ? (k % 2 ? history::PopKind::kMax : history::PopKind::kMin)
                                 : history::PopKind::kFifo,
                       std::nullopt, now_ns(), 0};
        h.value = !prio ? q.pop() : (k % 2 ? pq.pop_max() : pq.pop_min());
        h.end = now_ns();
        empties = (!h.value && done) ? empties + 1 : 0;
        pops[c].push_back(std::move(h));
      }
    });
  }
  for (auto& t : threads) t.join();
  faulty->set_options({});
  std::vector<std::string> left;
  while (auto v = prio ? pq.pop_min() : q.pop()) left.push_back(*v);
  std::vector<history::Push> all_pushes;
  for (auto& v : pushes) all_pushes.insert(all_pushes.end(), v.begin(), v.end());
  std::vector<history::Pop> all_pops;
  for (auto& v : pops) all_pops.insert(all_pops.end(), v.begin(), v.end());
  auto r = history::check(all_pushes, all_pops, left);
  testing::record_history(r);
  testing::record_faults(*db);
  EXPECT_TRUE(r.ok);
  for (const auto& p : r.problems) ADD_FAILURE() << p;
  EXPECT_EQ(r.popped + r.remaining, n);
  EXPECT_GT(faulty->injected_applied(), 0u);
  EXPECT_GT(faulty->injected_not_applied(), 0u);
  EXPECT_EQ(prio ? pq.size() : q.size(), 0);
}

INSTANTIATE_TEST_SUITE_P(Layers, FaultTest,
                         ::testing::Values(FaultParam{false, false}, FaultParam{false, true},
                                           FaultParam{true, false}, FaultParam{true, true},
                                           FaultParam{false, true, true},
                                           FaultParam{true, true, true}),
                         [](const ::testing::TestParamInfo<FaultParam>& info) {
                           return std::string(info.param.priority ? "PriorityQueue" : "Queue") +
                                  (info.param.high_contention ? "HighContention" : "Plain") +
                                  (info.param.short_request_ttl ? "ShortTtl" : "");
                         });

}  // namespace
}  // namespace kvq
