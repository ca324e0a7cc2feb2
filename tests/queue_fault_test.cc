// Pushes and pops through an engine that injects commit_unknown_result, both for commits it did
// not apply and for commits it did apply. Items must be neither duplicated (a retried push) nor
// lost (a retried pop whose first attempt took an item), also when a pushed item was popped by
// another client before the push's retry ran. The ShortTtl cases make high-contention requests
// outlive their request_ttl while their commits are retried (20 ms ttl, 5 ms per commit, 12
// poppers): fulfillers then expire requests and put deliveries back under the feet of poppers
// whose consuming commit ended in commit_unknown_result. Those cases check exactly-once only.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "engine/testing/fault_injection.h"
#include "kvq/kvq.h"
#include "layers/contention/stats.h"
#include "support/figures.h"
#include "support/layer_engines.h"
#include "support/producers_consumers.h"
#include "tools/kvq/history.h"

namespace kvq {
namespace {

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
  if (GetParam().short_request_ttl) qo.contention.request_ttl = std::chrono::milliseconds(20);
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
  const detail::ContentionStats& stats = detail::contention_stats();
  const std::uint64_t staged_before = stats.staged_pops.load();
  const std::uint64_t expired_before = stats.expired.load(),
                      reclaimed_before = stats.reclaimed.load();
  const testing::History h = testing::run_producers_and_consumers({
      .producers = 4,
      .consumers = GetParam().short_request_ttl ? 12 : 4,
      .items = n,
      .priority_of = [](int i) { return std::int64_t{i % 5}; },
      .push =
          [&](const history::Push& p) {
            if (prio) {
              pq.push(p.value, p.priority);
            } else {
              q.push(p.value);
            }
          },
      .pop =
          [&](int, int k) {
            if (!prio) {
              return testing::PopOutcome{
                  unordered ? history::PopKind::kAny : history::PopKind::kFifo, q.pop()};
            }
            const bool max = k % 2 == 1;
            return testing::PopOutcome{
                unordered ? history::PopKind::kAny
                          : (max ? history::PopKind::kMax : history::PopKind::kMin),
                max ? pq.pop_max() : pq.pop_min()};
          },
  });
  faulty->set_options({});
  std::vector<std::string> left;
  while (auto v = prio ? pq.pop_min() : q.pop()) left.push_back(*v);
  auto r = history::check(h.pushes, h.pops, left);
  testing::record_history(r);
  testing::record_faults(*db);
  EXPECT_TRUE(r.ok);
  for (const auto& p : r.problems) ADD_FAILURE() << p;
  EXPECT_EQ(r.popped + r.remaining, n);
  EXPECT_GT(faulty->injected_applied(), 0u);
  EXPECT_GT(faulty->injected_not_applied(), 0u);
  EXPECT_EQ(prio ? pq.size() : q.size(), 0);
  // The cases each parameter is for happened: staged pops under faults; requests that outlived
  // their ttl, and deliveries to them put back.
  if (GetParam().high_contention) {
    EXPECT_GT(stats.staged_pops.load(), staged_before);
  }
  if (GetParam().short_request_ttl) {
    EXPECT_GT(stats.expired.load(), expired_before);
    EXPECT_GT(stats.reclaimed.load(), reclaimed_before);
  }
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
