// The injectable clock (src/common/clock.h): kvq's time-dependent behaviour (lease expiry,
// transaction timeouts, retry back-off, watch waits) follows a SimulatedClock and costs no real
// time; and SimulatedClock::run schedules clients deterministically from a seed.
#include "common/clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/simulated_clock.h"
#include "kvq/kvq.h"

namespace kvq {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using RealClock = std::chrono::steady_clock;

Subspace queue_space() { return Subspace(Tuple().append("clock-test")); }

class SimulatedTimeTest : public ::testing::Test {
 protected:
  common::SimulatedClock clock_;
  common::ScopedClock installed_{clock_};
  std::shared_ptr<Database> db_ = open("memory:");
};

TEST_F(SimulatedTimeTest, ClockStartsAtItsWallStartAndAdvances) {
  EXPECT_EQ(clock_.wall_now(), common::WallTime(common::SimulatedClock::kDefaultWallStart));
  const common::SteadyTime before = clock_.steady_now();
  clock_.advance(seconds(5));
  EXPECT_EQ(clock_.steady_now() - before, seconds(5));
  EXPECT_EQ(common::clock().wall_now(),
            common::WallTime(common::SimulatedClock::kDefaultWallStart + seconds(5)));
}

TEST_F(SimulatedTimeTest, LeaseExpiresWhenSimulatedTimePasses) {
  Queue q(db_, queue_space());
  q.push("job");
  const auto real_start = RealClock::now();
  std::optional<Lease> first = q.take(seconds(30));
  ASSERT_TRUE(first);
  EXPECT_EQ(first->deadline, clock_.wall_now() + seconds(30));
  clock_.advance(seconds(29));
  EXPECT_FALSE(q.take(seconds(30))) << "the lease has not run out yet";
  clock_.advance(seconds(2));
  std::optional<Lease> second = q.take(seconds(30));
  ASSERT_TRUE(second) << "the lease ran out: the item is back";
  EXPECT_EQ(second->value, "job");
  EXPECT_EQ(second->attempt, first->attempt + 1);
  EXPECT_THROW(q.ack(*first), Error);
  q.ack(*second);
  EXPECT_TRUE(q.empty());
  EXPECT_LT(RealClock::now() - real_start, seconds(5));
}

TEST_F(SimulatedTimeTest, RetryBackOffSleepsInSimulatedTime) {
  Transaction tr = db_->create_transaction();
  const common::SteadyTime start = clock_.steady_now();
  const auto real_start = RealClock::now();
  for (int i = 0; i < 12; ++i) tr.on_error(Error(ErrorCode::kNotCommitted, "test"));
  // Back-off i is jittered in [d/2, d] with d = min(1 ms << i, 1 s): at least 1.5115 s in all.
  EXPECT_GE(clock_.steady_now() - start, milliseconds(1511));
  EXPECT_LT(RealClock::now() - real_start, milliseconds(500));
}

TEST_F(SimulatedTimeTest, TransactionTimeoutFollowsSimulatedTime) {
  Transaction tr = db_->create_transaction({.timeout = seconds(5)});
  tr.set("k", "v");
  clock_.advance(seconds(6));
  try {
    tr.commit();
    FAIL() << "commit after the timeout succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTransactionTimedOut);
  }
}

TEST_F(SimulatedTimeTest, UnreadyWaitMovesTimeToItsDeadline) {
  Watch w = db_->run([](Transaction& tr) { return tr.watch("k"); });
  const common::SteadyTime start = clock_.steady_now();
  EXPECT_FALSE(w.wait_for(seconds(10)));
  EXPECT_EQ(clock_.steady_now() - start, seconds(10));
}

// Each client appends its index at each of its steps; the order is the schedule.
std::vector<int> schedule_of(std::uint64_t seed) {
  common::SimulatedClock clock;
  std::vector<int> order;
  clock.run(4, seed, [&](int client) {
    for (int step = 0; step < 20; ++step) {
      order.push_back(client);
      clock.yield();
    }
  });
  return order;
}

TEST(SimulatedScheduleTest, SameSeedSameScheduleOtherSeedAnother) {
  const std::vector<int> a = schedule_of(7);
  EXPECT_EQ(a.size(), 80U);
  EXPECT_EQ(a, schedule_of(7));
  EXPECT_NE(a, schedule_of(8));
}

TEST(SimulatedScheduleTest, SleepersWakeInDeadlineOrderWithoutRealSleep) {
  common::SimulatedClock clock;
  common::ScopedClock installed(clock);
  std::vector<int> woke;
  const auto real_start = RealClock::now();
  clock.run(3, 1, [&](int client) {
    common::clock().sleep_for(seconds(10 * (3 - client)));
    woke.push_back(client);
  });
  EXPECT_EQ(woke, (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(clock.wall_now(),
            common::WallTime(common::SimulatedClock::kDefaultWallStart + seconds(30)));
  EXPECT_LT(RealClock::now() - real_start, seconds(5));
}

TEST(SimulatedScheduleTest, WatchWaitWakesOnAnotherClientsCommit) {
  common::SimulatedClock clock;
  common::ScopedClock installed(clock);
  auto db = open("memory:");
  Watch w = db->run([](Transaction& tr) { return tr.watch("k"); });
  bool fired = false;
  clock.run(2, 3, [&](int client) {
    if (client == 0) {
      fired = w.wait_for(std::chrono::hours(1));
    } else {
      common::clock().sleep_for(seconds(1));
      db->run([](Transaction& tr) { tr.set("k", "v"); });
    }
  });
  EXPECT_TRUE(fired);
  EXPECT_LT(clock.wall_now(),
            common::WallTime(common::SimulatedClock::kDefaultWallStart + std::chrono::hours(1)));
}

TEST(SimulatedScheduleTest, AClientsExceptionIsRethrownAfterAllFinish) {
  common::SimulatedClock clock;
  int finished = 0;
  EXPECT_THROW(clock.run(3, 5,
                         [&](int client) {
                           clock.yield();
                           if (client == 1) throw Error(ErrorCode::kInternalError, "client 1");
                           ++finished;
                         }),
               Error);
  EXPECT_EQ(finished, 2);
}

}  // namespace
}  // namespace kvq
