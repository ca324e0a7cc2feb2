// Blocking takes (Queue::take_wait, PriorityQueue::take_min_wait / take_max_wait) and what wakes
// every blocking wait (pop_wait too) on every engine: a push (wake latency p50 / p99 printed per
// engine with the load average; on the memory engine p50 must be under 10 ms), a delayed item
// coming due and an expired lease coming back (no push happens then: the wait is bounded by the
// earliest timer's due time; a timer written during the wait is noticed through a watch of the
// delayed-item counter), within due_tolerance() of the due time; nullopt at the timeout, timed_out
// when the time ran out while commits kept failing; bad input refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/testing/fault_injection.h"
#include "kvq/kvq.h"
#include "support/layer_fixture.h"
#include "support/test_values.h"

namespace kvq {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using testing::LayerTest;
using testing::percentile;
using Clock = std::chrono::steady_clock;

// How late after its due time a blocked wait may return a delayed item or an expired lease's item:
// one retry transaction plus the watch's timer. 50 ms on the embedded engines; 150 ms on etcd,
// whose transactions are network round trips and a Raft commit (a few ms idle, tens of ms on an
// oversubscribed machine); five times that under sanitizers.
milliseconds due_tolerance(const std::string& engine) {
  const milliseconds base = engine == "etcd" ? 150ms : 50ms;
  return testing::kSanitizerBuild ? 5 * base : base;
}

void report(const std::string& what, const std::vector<double>& us) {
  double load[1] = {0};
  if (getloadavg(load, 1) < 1) load[0] = -1;
  std::printf(
      "take_wait wake latency %s: p50 %.0f us, p99 %.0f us (%zu wakes, load average %.2f)\n",
      what.c_str(), percentile(us, 0.5), percentile(us, 0.99), us.size(), load[0]);
}

// How long after `due` (wall clock) `wait` returned, in ms (negative: before it).
template <typename Wait>
double returned_after_due(Wait&& wait, WallClock::time_point due) {
  wait();
  return std::chrono::duration<double, std::milli>(WallClock::now() - due).count();
}

class TakeWaitTest : public LayerTest {
 protected:
  QueueOptions options() const {
    QueueOptions o;
    o.high_contention = hc();
    return o;
  }
  int rounds() const { return GetParam().engine == "etcd" ? 20 : 50; }
  double tolerance_ms() const {
    return static_cast<double>(due_tolerance(GetParam().engine).count());
  }
  // Runs `one_try` (it sets a case up, waits, checks the item and returns how late after the due
  // time the wait returned, in ms) up to three times until that is within the tolerance. On an
  // oversubscribed machine a descheduled thread can be 100+ ms late whatever the mechanism; a wait
  // its timer did not wake would be seconds late (its 5 s timeout) on every try.
  void expect_on_time(const std::function<double()>& one_try, const std::string& what) {
    std::string lates;
    for (int i = 0; i < 3; ++i) {
      const double late_ms = one_try();
      EXPECT_GE(late_ms, -1.0) << what << ": returned before it was due";
      lates += std::to_string(late_ms) + " ms ";
      if (late_ms <= tolerance_ms()) break;
      if (i == 2) ADD_FAILURE() << what << ": late on every try: " << lates;
    }
    std::printf("%s: returned after %s\n", what.c_str(), lates.c_str());
  }
};

TEST_P(TakeWaitTest, TakeWaitWakesSoonAfterAPush) {
  Queue q(db_, space_, options());
  std::vector<double> us;
  for (int i = 0; i < rounds(); ++i) {
    std::atomic<Clock::time_point> pushed{};
    std::optional<Lease> got;
    Clock::time_point woke;
    std::thread waiter([&] {
      got = q.take_wait(30s, 10s);
      woke = Clock::now();
    });
    std::this_thread::sleep_for(20ms);  // the waiter blocks on its watch
    pushed = Clock::now();
    q.push("item-" + std::to_string(i));
    waiter.join();
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->value, "item-" + std::to_string(i));
    q.ack(*got);
    us.push_back(std::chrono::duration<double, std::micro>(woke - pushed.load()).count());
  }
  report(testing::layer_param_name({GetParam(), 0}), us);
  if (GetParam().engine == "memory") {
    EXPECT_LT(percentile(us, 0.5), 10'000);
  }
}

TEST_P(TakeWaitTest, PriorityQueueTakeWaitsWakeOnAPushAndTakeTheirEnd) {
  PriorityQueue pq(db_, space_, options());
  for (bool max : {false, true}) {
    std::optional<Lease> got;
    std::thread waiter(
        [&] { got = max ? pq.take_max_wait(30s, 10s) : pq.take_min_wait(30s, 10s); });
    std::this_thread::sleep_for(30ms);
    pq.push_batch({{"low", 1}, {"high", 9}});
    waiter.join();
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->value, max ? "high" : "low");
    pq.ack(*got);
    pq.clear();
  }
}

TEST_P(TakeWaitTest, TakeWaitReturnsNulloptAtItsTimeoutAndRefusesBadInput) {
  Queue q(db_, space_, options());
  const auto t0 = Clock::now();
  EXPECT_EQ(q.take_wait(30s, 150ms), std::nullopt);
  const auto took = Clock::now() - t0;
  EXPECT_GE(took, 140ms);
  EXPECT_LT(took, 2'000ms);
  for (auto [vt, timeout] :
       {std::pair{0ms, 10ms}, std::pair{-1ms, 10ms}, std::pair{1000ms, -1ms}}) {
    try {
      q.take_wait(vt, timeout);
      ADD_FAILURE() << "no error for vt " << vt.count() << " timeout " << timeout.count();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidOptionValue);
    }
  }
  q.push("x");
  EXPECT_EQ(q.take_wait(30s, 0ms)->value, "x");
  EXPECT_EQ(q.stats().leased, 1);
}

// Waits whose every commit fails (spurious conflicts at rate 1) over a queue holding items: each
// ends within its timeout plus the 1 s an attempt under way may take, with timed_out naming the
// last error, not with nullopt (which says nothing was ready), and removes nothing. Over empty
// queues the same waits return nullopt: an attempt that finds nothing commits nothing. (take_wait
// once retried forever here; pop_wait said nullopt; FairQueue's waits retried forever.)
class WaitFaults : public ::testing::Test {
 protected:
  // Runs `wait` and checks that it ends in timed_out naming not_committed, in under 3 s.
  template <typename Wait>
  static void expect_timed_out(const std::string& what, Wait&& wait) {
    SCOPED_TRACE(what);
    const auto t0 = Clock::now();
    try {
      wait();
      ADD_FAILURE() << "returned instead of throwing timed_out";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kTimedOut) << e.what();
      EXPECT_NE(std::string(e.what()).find("not_committed"), std::string::npos) << e.what();
    }
    EXPECT_GE(Clock::now() - t0, 200ms);
    EXPECT_LT(Clock::now() - t0, 3'000ms);
  }

  void fail_every_commit() {
    engine::FaultInjectionOptions always;
    always.conflict = 1.0;
    faults_->set_options(always);
  }
  void restore_commits() { faults_->set_options({}); }

  // With an item in each of a Queue, a PriorityQueue and a FairQueue made with these options (in
  // `mode`'s own subspaces), checks that their pop waits under commits that always fail end in
  // timed_out and leave the items.
  void expect_pop_waits_time_out(const std::string& mode, const QueueOptions& qo,
                                 const FairQueueOptions& fo) {
    SCOPED_TRACE(mode);
    const Tuple in = Tuple().append(mode);
    Queue q(faulty_, q_space_.subspace(in), qo);
    PriorityQueue pq(faulty_, pq_space_.subspace(in), qo);
    FairQueue fq(faulty_, fair_space_.subspace(in), fo);
    q.push("a");
    pq.push("b", 1);
    fq.push("t", "c");
    fail_every_commit();
    expect_timed_out("queue pop_wait", [&] { q.pop_wait(200ms); });
    expect_timed_out("pq pop_max_wait", [&] { pq.pop_max_wait(200ms); });
    expect_timed_out("fair pop_wait", [&] { fq.pop_wait(200ms); });
    restore_commits();
    EXPECT_EQ(q.pop(), "a");
    EXPECT_EQ(pq.pop_min(), "b");
    EXPECT_EQ(fq.pop()->value, "c");
  }

  std::shared_ptr<Database> base_ = kvq::open("memory:");
  std::shared_ptr<engine::FaultInjectionEngine> faults_ =
      std::make_shared<engine::FaultInjectionEngine>(base_->engine(),
                                                     engine::FaultInjectionOptions{});
  std::shared_ptr<Database> faulty_ = std::make_shared<Database>(faults_, "faulty-memory:");
  Subspace q_space_{Tuple().append("q")}, pq_space_{Tuple().append("pq")},
      fair_space_{Tuple().append("fair")};
};

TEST_F(WaitFaults, WaitsWhoseCommitsAlwaysFailThrowTimedOutAndRemoveNothing) {
  Queue q(faulty_, q_space_);
  PriorityQueue pq(faulty_, pq_space_);
  FairQueue fq(faulty_, fair_space_);
  q.push("a");
  pq.push("b", 1);
  fq.push("t", "c");
  fail_every_commit();
  expect_timed_out("queue take_wait", [&] { q.take_wait(30s, 200ms); });
  expect_timed_out("pq take_min_wait", [&] { pq.take_min_wait(30s, 200ms); });
  expect_timed_out("fair take_wait", [&] { fq.take_wait(30s, 200ms); });
  restore_commits();
  EXPECT_EQ(q.pop(), "a");
  EXPECT_EQ(pq.pop_min(), "b");
  EXPECT_EQ(fq.pop()->value, "c");
  expect_pop_waits_time_out("plain", {}, {});
}

// The same with high-contention pops, whose attempt registers a request when its pop fails: the
// registration is bounded by the wait too (it retried forever before); and with combined pops
// (options.combine), plain and high-contention: a group's batches are bounded by its pops'
// deadlines (they retried forever before).
TEST_F(WaitFaults, HighContentionAndCombinedWaitsWhoseCommitsAlwaysFailThrowTimedOut) {
  for (const bool combine : {false, true}) {
    for (const bool hc : {false, true}) {
      if (!combine && !hc) continue;  // the plain case above
      QueueOptions qo;
      qo.combine = combine;
      qo.high_contention = hc;
      FairQueueOptions fo;
      fo.combine = combine;
      fo.high_contention = hc;
      expect_pop_waits_time_out(std::string(combine ? "combined" : "") + (hc ? " hc" : ""), qo, fo);
    }
  }
}

// Pop batches are bounded by options.pop_timeout as single pops are (before session 30 they
// retried for ever), in every mode, and remove nothing when they time out.
TEST_F(WaitFaults, PopBatchesWhoseCommitsAlwaysFailThrowTimedOutAfterPopTimeout) {
  for (const bool combine : {false, true}) {
    for (const bool hc : {false, true}) {
      QueueOptions o;
      o.combine = combine;
      o.high_contention = hc;
      o.pop_timeout = 200ms;
      const std::string mode =
          std::string("batch") + (combine ? " combined" : "") + (hc ? " hc" : "");
      SCOPED_TRACE(mode);
      const Tuple in = Tuple().append(mode);
      Queue q(faulty_, q_space_.subspace(in), o);
      PriorityQueue pq(faulty_, pq_space_.subspace(in), o);
      q.push_batch(std::vector<std::string>{"a", "b"});
      pq.push("c", 1);
      fail_every_commit();
      expect_timed_out("queue pop_batch", [&] { q.pop_batch(2); });
      expect_timed_out("pq pop_min_batch", [&] { pq.pop_min_batch(2); });
      expect_timed_out("pq pop_max_batch", [&] { pq.pop_max_batch(2); });
      restore_commits();
      EXPECT_EQ(q.pop_batch(3), (std::vector<std::string>{"a", "b"}));
      EXPECT_EQ(pq.pop_max_batch(3), (std::vector<std::string>{"c"}));
    }
  }
}

// A combined pop_wait whose group is served by a thread popping without a timeout, or queued
// behind that thread's group, still ends at its deadline (timed_out), while that pop() retries on
// and gets its item once commits succeed again. Both orders: the waiting pop leading, and queued.
TEST_F(WaitFaults, ACombinedWaitSharingGroupsWithAPopWithoutTimeoutEndsInTime) {
  QueueOptions qo;
  qo.combine = true;
  Queue q(faulty_, q_space_, qo);
  for (bool wait_first : {true, false}) {
    SCOPED_TRACE(wait_first ? "pop_wait first" : "pop first");
    q.push("a");
    fail_every_commit();
    std::optional<std::string> popped;
    std::thread waiting;
    std::thread popping;
    const auto wait = [&] {
      const auto t0 = Clock::now();
      try {
        q.pop_wait(200ms);
        ADD_FAILURE() << "pop_wait returned instead of throwing timed_out";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kTimedOut) << e.what();
      }
      EXPECT_LT(Clock::now() - t0, 3'000ms);
    };
    if (wait_first) {
      waiting = std::thread(wait);
      std::this_thread::sleep_for(50ms);
      popping = std::thread([&] { popped = q.pop(); });
    } else {
      popping = std::thread([&] { popped = q.pop(); });
      std::this_thread::sleep_for(50ms);
      waiting = std::thread(wait);
    }
    waiting.join();
    restore_commits();
    popping.join();
    EXPECT_EQ(popped, "a");
  }
}

TEST_F(WaitFaults, WaitsOverEmptyQueuesStillEndInNullopt) {
  fail_every_commit();
  Queue q(faulty_, q_space_);
  FairQueue fq(faulty_, fair_space_);
  EXPECT_EQ(q.pop_wait(100ms), std::nullopt);
  EXPECT_EQ(q.take_wait(30s, 100ms), std::nullopt);
  EXPECT_EQ(fq.pop_wait(100ms), std::nullopt);
  EXPECT_EQ(fq.take_wait(30s, 100ms), std::nullopt);
}

// A delayed item, pushed before the waiters block: no push comes, yet pop_wait, take_wait and
// take_min_wait return it soon after it is due.
TEST_P(TakeWaitTest, ADelayedItemComingDueWakesBlockedWaits) {
  Queue q(db_, space_, options());
  PriorityQueue pq(db_, space_.subspace(Tuple().append("pq")), options());
  for (int which = 0; which < 3; ++which) {
    expect_on_time(
        [&] {
          PushOptions later;
          later.not_before = WallClock::now() + 300ms;
          std::optional<std::string> got;
          const auto value_of = [&](const std::optional<Lease>& l) {
            if (l) got = l->value;
          };
          double late_ms = 0;
          if (which == 0) {
            q.push("d0", later);
            late_ms = returned_after_due([&] { got = q.pop_wait(5s); }, *later.not_before);
          } else if (which == 1) {
            q.push("d1", later);
            late_ms =
                returned_after_due([&] { value_of(q.take_wait(30s, 5s)); }, *later.not_before);
          } else {
            pq.push("d2", 4, later);
            late_ms =
                returned_after_due([&] { value_of(pq.take_min_wait(30s, 5s)); }, *later.not_before);
          }
          EXPECT_EQ(got, "d" + std::to_string(which));
          return late_ms;
        },
        "delayed item due -> wait " + std::to_string(which));
  }
}

// A delayed item pushed (and a lease nacked with a delay) while the waiter is already blocked: it
// writes no size counter, yet the waiter learns of the new timer and returns the item when due.
TEST_P(TakeWaitTest, ATimerWrittenDuringTheWaitWakesItWhenDue) {
  Queue q(db_, space_, options());
  for (bool nack : {false, true}) {
    expect_on_time(
        [&] {
          std::optional<Lease> held;
          if (nack) {
            q.push("n");
            held = q.take(30s);
          }
          std::atomic<WallClock::time_point> due{};
          std::thread writer([&] {
            std::this_thread::sleep_for(100ms);  // the waiter blocks first
            due = WallClock::now() + 300ms;
            if (nack) {
              q.nack(*held, 300ms);
            } else {
              PushOptions later;
              later.not_before = due.load();
              q.push("d", later);
            }
          });
          const std::optional<Lease> got = q.take_wait(30s, 5s);
          const double late_ms =
              std::chrono::duration<double, std::milli>(WallClock::now() - due.load()).count();
          writer.join();
          EXPECT_TRUE(got.has_value());
          if (got) {
            EXPECT_EQ(got->value, nack ? "n" : "d");
            q.ack(*got);
          }
          return late_ms;
        },
        nack ? "nack with a delay during the wait" : "delayed push during the wait");
  }
}

// A lease taken by another worker runs out while the waiters are blocked on an empty queue: the
// item comes back with no push, and pop_wait / take_wait return it soon after the deadline.
TEST_P(TakeWaitTest, AnExpiredLeaseComingBackWakesBlockedWaits) {
  Queue q(db_, space_, options());
  for (bool take : {false, true}) {
    expect_on_time(
        [&] {
          q.push("job");
          const std::optional<Lease> first = q.take(300ms);
          EXPECT_TRUE(first.has_value());
          if (!first) return 0.0;
          std::optional<std::string> got;
          int attempt = 0;
          const double late_ms = returned_after_due(
              [&] {
                if (!take) {
                  got = q.pop_wait(5s);
                  return;
                }
                auto l = q.take_wait(30s, 5s);
                if (l) {
                  got = l->value;
                  attempt = l->attempt;
                  q.ack(*l);
                }
              },
              first->deadline);
          EXPECT_EQ(got, "job");
          if (take) {
            EXPECT_EQ(attempt, 2);
          }
          return late_ms;
        },
        take ? "lease expired -> take_wait" : "lease expired -> pop_wait");
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, TakeWaitTest, ::testing::ValuesIn(testing::layer_params()),
                         testing::layer_param_name);

}  // namespace
}  // namespace kvq
