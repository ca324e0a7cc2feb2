// Blocking waits (pop_wait, take_wait) at the moments between their steps: what another client
// does between a wait's failed attempt and the transaction that arms its watches, and a watch that
// fails with a retryable error. An engine wrapper runs those events at exactly that point.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "kvq/kvq.h"
#include "layers/fair/fair_keys.h"
#include "support/hooked_engine.h"

namespace kvq {
namespace {

using namespace std::chrono_literals;
using testing::HookedEngine;
using Clock = std::chrono::steady_clock;

class WaitRaceTest : public ::testing::Test {
 protected:
  std::shared_ptr<Database> base_ = open("memory:");
  std::shared_ptr<HookedEngine> hooked_ = std::make_shared<HookedEngine>(base_->engine());
  std::shared_ptr<Database> db_ = std::make_shared<Database>(hooked_, "hooked-memory:");
  Subspace space_{Tuple().append("wait-race")};
};

// A push of two items, and another client's pop of the first, both between a fair pop_wait's
// empty attempt and the transaction arming its watch: the pop files the tenant in the ring and
// clears its wake-up without writing the change counter the wait watches, so the wait must see the
// ring's tenant (and try again) rather than sleep to its timeout with the second item ready.
TEST_F(WaitRaceTest, AFairWaitArmedAfterAnotherPopFiledTheTenantTakesTheItemLeft) {
  FairQueue waiting(db_, space_);
  FairQueue other(base_, space_);
  const detail::FairKeys keys(space_);
  // The arming transaction's first read: the first wake-up (the attempts read up to 16).
  hooked_->before_read(keys.wakes_due(INT64_MAX).begin, 1, [&] {
    other.push_batch("t", {"a", "b"});
    const std::optional<FairItem> first = other.pop();
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->value, "a");
  });
  const auto start = Clock::now();
  const std::optional<FairItem> got = waiting.pop_wait(3s);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->value, "b");
  EXPECT_LT(Clock::now() - start, 1s) << "slept to its timeout with an item ready";
  EXPECT_FALSE(other.pop().has_value());
}

// A watch that fails with a retryable error (on etcd: its start revision was compacted while its
// stream reconnected) wakes the wait, which arms again; it is not the wait's error.
TEST_F(WaitRaceTest, AWatchFailingWithARetryableErrorIsArmedAgain) {
  Queue waiting(db_, space_.subspace(Tuple().append("q")));
  Queue other(base_, space_.subspace(Tuple().append("q")));
  FairQueue fair_waiting(db_, space_.subspace(Tuple().append("f")));
  FairQueue fair_other(base_, space_.subspace(Tuple().append("f")));
  const Error too_old(ErrorCode::kTransactionTooOld, "test: watch start revision compacted");
  std::thread pusher([&] {
    std::this_thread::sleep_for(300ms);
    other.push("x");
    fair_other.push("t", "y");
  });
  hooked_->fail_next_watch(too_old);
  const std::optional<std::string> got = waiting.pop_wait(5s);
  hooked_->fail_next_watch(too_old);
  const std::optional<FairItem> fair_got = fair_waiting.pop_wait(5s);
  pusher.join();
  EXPECT_EQ(got, std::optional<std::string>("x"));
  ASSERT_TRUE(fair_got.has_value());
  EXPECT_EQ(fair_got->value, "y");
}

}  // namespace
}  // namespace kvq
