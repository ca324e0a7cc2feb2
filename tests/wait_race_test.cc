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

#include "engine/engine.h"
#include "engine/watch_state.h"
#include "kvq/kvq.h"
#include "layers/fair/fair_keys.h"

namespace kvq {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Passes everything to `base`, except: once, a range read starting at a given key with a given
// limit first runs a callback (in the reading session, before the read fixes its version), and
// once, a watch is failed with a given error instead of being registered.
class HookedEngine final : public engine::Engine {
 public:
  explicit HookedEngine(std::shared_ptr<engine::Engine> base) : base_(std::move(base)) {}

  // Runs `event` before the first range read of [begin, ...) with `limit` (once).
  void before_read(std::string begin, int limit, std::function<void()> event) {
    std::lock_guard lock(mu_);
    trigger_ = Trigger{std::move(begin), limit, std::move(event)};
  }
  // Fails the next watch registered with `error`.
  void fail_next_watch(Error error) {
    std::lock_guard lock(mu_);
    watch_error_ = std::move(error);
  }

  std::unique_ptr<engine::Session> begin() override {
    return std::make_unique<HookedSession>(*this, base_->begin());
  }
  void watch(std::string key, std::optional<std::string> value_seen, Version version,
             std::shared_ptr<detail::WatchState> state) override {
    std::optional<Error> error;
    {
      std::lock_guard lock(mu_);
      error.swap(watch_error_);
    }
    if (error) return state->fail(*error);
    base_->watch(std::move(key), std::move(value_seen), version, std::move(state));
  }
  std::uint64_t commit_batches() const override { return base_->commit_batches(); }
  TransactionLimits limits() const override { return base_->limits(); }
  bool commits_can_be_unknown() const override { return base_->commits_can_be_unknown(); }

 private:
  struct Trigger {
    std::string begin;
    int limit;
    std::function<void()> event;
  };

  // The event of a read of [begin, ...) with `limit`, if one is due (taken: it runs once).
  std::function<void()> take_event(std::string_view begin, int limit) {
    std::lock_guard lock(mu_);
    if (!trigger_ || trigger_->begin != begin || trigger_->limit != limit) return {};
    std::function<void()> event = std::move(trigger_->event);
    trigger_.reset();
    return event;
  }

  class HookedSession final : public engine::Session {
   public:
    HookedSession(HookedEngine& engine, std::unique_ptr<engine::Session> base)
        : engine_(engine), base_(std::move(base)) {}
    Version read_version() override { return base_->read_version(); }
    std::optional<std::string> get(std::string_view key) override { return base_->get(key); }
    std::vector<KeyValue> get_range(std::string_view begin, std::string_view end, int limit,
                                    bool reverse) override {
      if (std::function<void()> event = engine_.take_event(begin, limit)) event();
      return base_->get_range(begin, end, limit, reverse);
    }
    engine::CommitResult commit(engine::CommitRequest request) override {
      return base_->commit(std::move(request));
    }

   private:
    HookedEngine& engine_;
    std::unique_ptr<engine::Session> base_;
  };

  std::shared_ptr<engine::Engine> base_;
  std::mutex mu_;
  std::optional<Trigger> trigger_;
  std::optional<Error> watch_error_;
};

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
