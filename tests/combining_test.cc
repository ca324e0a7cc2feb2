// Flat combining (QueueOptions::combine) on every engine, plain and high-contention: real threads
// on one shared Queue / PriorityQueue object, the whole history checked (nothing lost, nothing
// twice, FIFO and priority promises, no wrong "empty"); operations really combine (fewer commits
// than operations); and under injected commit_unknown_result on every engine a combined batch
// retried after an unknown result neither inserts twice nor loses a popped item.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/testing/fault_injection.h"
#include "kvq/kvq.h"
#include "support/engines.h"
#include "support/fault_urls.h"
#include "support/figures.h"
#include "support/layer_fixture.h"
#include "support/producers_consumers.h"
#include "tools/kvq/history.h"

namespace kvq {
namespace {

using testing::LayerTest;

void expect_ok(const history::Result& r) {
  EXPECT_TRUE(r.ok) << r.violations << " violations";
  for (const auto& p : r.problems) ADD_FAILURE() << p;
}

QueueOptions combining(bool high_contention) {
  QueueOptions o;
  o.combine = true;
  o.high_contention = high_contention;
  return o;
}

// Producers push singly, consumers pop singly, all on one object: half of the clients each.
// `priority`: a PriorityQueue with pop_min and pop_max; else a Queue. Returns the checked history.
history::Result run_history(std::shared_ptr<Database> db, const Subspace& space, QueueOptions o,
                            bool priority, int n, int clients) {
  Queue q(db, space, o);
  PriorityQueue pq(db, space, o);
  const testing::History h = testing::run_producers_and_consumers({
      .producers = clients / 2,
      .consumers = clients - clients / 2,
      .items = n,
      .priority_of = [&](int i) { return std::int64_t{priority ? i % 7 : 0}; },
      .push =
          [&](const history::Push& p) {
            priority ? pq.push(p.value, p.priority) : q.push(p.value);
          },
      .pop =
          [&](int c, int k) {
            if (!priority) return testing::PopOutcome{.value = q.pop()};
            if ((k + c) % 2 == 1) return testing::PopOutcome{history::PopKind::kMax, pq.pop_max()};
            return testing::PopOutcome{history::PopKind::kMin, pq.pop_min()};
          },
  });
  std::vector<std::string> left;
  while (auto v = priority ? pq.pop_min() : q.pop()) left.push_back(*v);
  history::Result r = history::check(h.pushes, h.pops, left);
  testing::record_history(r);
  testing::record_faults(*db);
  return r;
}

class CombiningTest : public LayerTest {
 protected:
  int items() const { return testing::history_items(GetParam().engine); }
};

TEST_P(CombiningTest, QueueHistoryWithCombiningLosesNothingAndKeepsFifo) {
  auto r = run_history(db_, space_, combining(hc()), false, items(), 16);
  EXPECT_EQ(r.popped + r.remaining, items());
  expect_ok(r);
}

// QueueOptions::combine_favors_latency: leaders yield their core before serving alone; the
// history promises are the same.
TEST_P(CombiningTest, QueueHistoryWithLeadersFavoringLatencyLosesNothingAndKeepsFifo) {
  QueueOptions o = combining(hc());
  o.combine_favors_latency = true;
  auto r = run_history(db_, space_, o, false, items(), 16);
  EXPECT_EQ(r.popped + r.remaining, items());
  expect_ok(r);
}

TEST_P(CombiningTest, PriorityQueueHistoryWithCombiningKeepsPriorityOrder) {
  auto r = run_history(db_, space_, combining(hc()), true, items(), 16);
  EXPECT_EQ(r.popped + r.remaining, items());
  expect_ok(r);
}

// 16 threads pushing at once share transactions: never more commits than pushes, and fewer where
// a commit takes long enough for threads to queue up behind it (rocksdb, etcd; on the memory engine
// a push takes microseconds, so on 2 busy cores threads rarely overlap: tests/combiner_test.cc
// shows the grouping deterministically).
TEST_P(CombiningTest, ConcurrentPushesShareTransactions) {
  Queue q(db_, space_, combining(hc()));
  const int threads = 16, per = GetParam().engine == "etcd" ? 20 : 200;
  const std::uint64_t before = db_->stats().commits;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < per; ++i) q.push(std::to_string(t * per + i));
    });
  }
  for (auto& t : ts) t.join();
  const std::uint64_t commits = db_->stats().commits - before;
  std::printf("%d pushes in %llu commits\n", threads * per,
              static_cast<unsigned long long>(commits));
  if (GetParam().engine == "memory") {
    EXPECT_LE(commits, static_cast<std::uint64_t>(threads * per));
  } else {
    EXPECT_LT(commits, static_cast<std::uint64_t>(threads * per));
  }
  EXPECT_EQ(q.size(), threads * per);
}

INSTANTIATE_TEST_SUITE_P(Engines, CombiningTest, ::testing::ValuesIn(testing::layer_params()),
                         testing::layer_param_name);

// The memory engine with a byte limit of `max_bytes` per transaction (as etcd run with a small
// --max-request-bytes), whose commits take 300 ms when they write a value starting "SLOW" and
// fail with connection_failed when they write one starting "DOWN": the real store underneath,
// faults on cue.
class CuedEngine final : public engine::Engine {
 public:
  CuedEngine(std::shared_ptr<engine::Engine> base, std::size_t max_bytes)
      : base_(std::move(base)), max_bytes_(max_bytes) {}
  std::unique_ptr<engine::Session> begin() override {
    return std::make_unique<CuedSession>(base_->begin(), &slow_started_);
  }
  // Whether a commit of a "SLOW" value has begun its 300 ms.
  bool slow_started() const { return slow_started_.load(); }
  void watch(std::string key, std::optional<std::string> value_seen, Version version,
             std::shared_ptr<detail::WatchState> state) override {
    base_->watch(std::move(key), std::move(value_seen), version, std::move(state));
  }
  std::uint64_t commit_batches() const override { return base_->commit_batches(); }
  TransactionLimits limits() const override { return {.max_bytes = max_bytes_}; }

 private:
  class CuedSession final : public engine::Session {
   public:
    CuedSession(std::unique_ptr<engine::Session> base, std::atomic<bool>* slow_started)
        : base_(std::move(base)), slow_started_(slow_started) {}
    Version read_version() override { return base_->read_version(); }
    std::optional<std::string> get(std::string_view key) override { return base_->get(key); }
    std::vector<KeyValue> get_range(std::string_view begin, std::string_view end, int limit,
                                    bool reverse) override {
      return base_->get_range(begin, end, limit, reverse);
    }
    engine::CommitResult commit(engine::CommitRequest request) override {
      for (const engine::Mutation& m : request.mutations) {
        if (m.param2.starts_with("SLOW")) {
          slow_started_->store(true);
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
        }
        if (m.param2.starts_with("DOWN")) throw Error(ErrorCode::kConnectionFailed, "cued: down");
      }
      return base_->commit(std::move(request));
    }

   private:
    std::unique_ptr<engine::Session> base_;
    std::atomic<bool>* slow_started_;
  };

  std::shared_ptr<engine::Engine> base_;
  std::size_t max_bytes_;
  std::atomic<bool> slow_started_{false};
};

// A combined group too large for one transaction is pushed in halves. A half that then fails
// answers only its own pushes with the error: the halves before it committed, and their pushes
// return normally (before, every push of the group got the error, so a caller retrying its
// committed push pushed it twice). And a push alone in its group commits whatever a plain push
// commits (the batch's reserve made a 9,000-byte push fail under a 15,000-byte limit). Found in
// review in session 23.
TEST(CombiningFaults, AFailingHalfOfAGroupFailsOnlyItsOwnPushes) {
  auto base = open("memory:");
  auto cued = std::make_shared<CuedEngine>(base->engine(), 15000);
  auto db = std::make_shared<Database>(cued, "cued-memory:");
  QueueOptions o;
  o.combine = true;
  Queue q(db, Subspace(Tuple().append("halves")), o);
  q.push(std::string(9000, 'y'));  // alone: as a plain push
  auto push = [&](const std::string& value) -> std::string {
    try {
      q.push(value);
      return "ok";
    } catch (const Error& e) {
      return std::string(error_name(e.code()));
    }
  };
  std::string slow, good, down;
  std::thread leader([&] { slow = push("SLOW"); });  // leads alone for 300 ms
  while (!cued->slow_started()) std::this_thread::yield();
  std::thread first([&] { good = push("good" + std::string(3500, 'x')); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::thread second([&] { down = push("DOWN" + std::string(3500, 'x')); });
  leader.join();
  first.join();
  second.join();
  EXPECT_EQ(slow, "ok");
  EXPECT_EQ(good, "ok") << "its half committed";
  EXPECT_EQ(down, "connection_failed");
  std::vector<std::string> left;
  while (std::optional<std::string> v = q.pop()) left.push_back(v->substr(0, 4));
  EXPECT_EQ(left, (std::vector<std::string>{"yyyy", "SLOW", "good"}));
}

TEST(CombiningFaults, UnknownResultsNeitherDuplicateNorLoseCombinedItems) {
  for (const std::string& url : testing::faulty_urls("unknown_result_rate=0.2&fault_seed=5")) {
    const bool etcd = url.rfind("etcd", 0) == 0;
    for (bool priority : {false, true}) {
      for (bool hc : {false, true}) {
        auto db = kvq::open(url);
        Subspace space(Tuple().append("cf").append(priority).append(hc));
        // Smaller under sanitizers (this test took 68 s under ASan + UBSan at full size).
        const int n = etcd ? 300 : (testing::kSanitizerBuild ? 1000 : 3000);
        auto r = run_history(db, space, combining(hc), priority, n, 8);
        const auto faulty = std::dynamic_pointer_cast<engine::FaultInjectionEngine>(db->engine());
        ASSERT_TRUE(faulty) << url;
        EXPECT_GT(faulty->injected_applied(), 0u) << url << ": no applied unknown result injected";
        EXPECT_GT(faulty->injected_not_applied(), 0u) << url << ": none not applied injected";
        testing::record_faults(*db);
        EXPECT_EQ(r.popped + r.remaining, n) << url;
        EXPECT_TRUE(r.ok) << url << " priority " << priority << " hc " << hc;
        for (const auto& p : r.problems) ADD_FAILURE() << url << ": " << p;
      }
    }
  }
}

// Consumers alternating pop() under a short pop_timeout and pop_wait(0) (whose attempt gets
// 1 s) on one combined Queue, while commits are slow and often fail: pops share groups with others
// whose deadlines differ, so groups run out of time, answer their expired pops with timed_out and
// defer the rest, and followers queued past their deadlines withdraw. A pop that threw timed_out
// must have taken nothing: the history (which leaves such pops out) stays exact, FIFO and empty
// answers included. (In high-contention mode a registration that ended in commit_unknown_result
// and then ran out of time was left behind when it had committed: items delivered to it waited
// for request_ttl, lost to the history here and behind later pops after.)
history::Result run_timing_out_history(const std::string& url, bool high_contention, int n,
                                       std::atomic<int>& timeouts) {
  auto db = kvq::open(url);
  QueueOptions o = combining(high_contention);
  o.pop_timeout = std::chrono::milliseconds(8);
  Queue q(db, Subspace(Tuple().append("timeouts").append(high_contention)), o);
  const testing::History h = testing::run_producers_and_consumers({
      .producers = 2,
      .consumers = 6,
      .items = n,
      .push = [&](const history::Push& p) { q.push(p.value); },
      .pop =
          [&](int c, int k) {
            try {
              return testing::PopOutcome{
                  .value = (k + c) % 2 == 0 ? q.pop() : q.pop_wait(std::chrono::milliseconds(0))};
            } catch (const Error& e) {
              if (e.code() != ErrorCode::kTimedOut) throw;
              ++timeouts;
              return testing::PopOutcome{.answered = false};
            }
          },
  });
  std::vector<std::string> left;
  for (;;) {  // the faults are still on: a drain's pop may time out too
    try {
      std::optional<std::string> v = q.pop_wait(std::chrono::milliseconds(0));
      if (!v) break;
      left.push_back(*v);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kTimedOut) throw;
    }
  }
  history::Result r = history::check(h.pushes, h.pops, left);
  testing::record_history(r);
  testing::record_faults(*db);
  return r;
}

TEST(CombiningFaults, PopsThatTimeOutInSharedGroupsTakeNothing) {
  for (const std::string& url :
       testing::faulty_urls("conflict_rate=0.5&unknown_result_rate=0.1&delay_ms=1&fault_seed=9")) {
    const bool etcd = url.rfind("etcd", 0) == 0;
    for (bool hc : {false, true}) {
      std::atomic<int> timeouts{0};
      const int n = etcd ? 60 : (testing::kSanitizerBuild ? 80 : 160);
      const history::Result r = run_timing_out_history(url, hc, n, timeouts);
      EXPECT_EQ(r.popped + r.remaining, n) << url << " hc " << hc;
      EXPECT_TRUE(r.ok) << url << " hc " << hc;
      for (const auto& p : r.problems) ADD_FAILURE() << url << ": " << p;
      EXPECT_GT(timeouts.load(), 0) << url << " hc " << hc << ": no pop timed out";
      std::printf("%s hc %d: %d pops timed out, %lld popped\n", url.c_str(), hc, timeouts.load(),
                  static_cast<long long>(r.popped));
      std::fflush(stdout);
    }
  }
}

}  // namespace
}  // namespace kvq
