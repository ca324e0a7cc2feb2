// Internal: the shared state behind a kvq::Watch. Engines fire or fail it; users wait on it through
// kvq::Watch. Every engine (memory, rocksdb, etcd) uses this one class.
#ifndef KVQ_SRC_TXN_WATCH_STATE_H_
#define KVQ_SRC_TXN_WATCH_STATE_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "kvq/error.h"

namespace kvq::detail {

// What several watches can wake: Watch::wait_any subscribes one to each watch it waits on.
// Thread-safe.
class WatchWaker {
 public:
  // Wakes the waiter (now or, if it is not yet waiting, when it waits).
  void wake();
  // Blocks until woken or `timeout` passes.
  void wait_for(std::chrono::milliseconds timeout);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
};

// A one-shot outcome: pending, then either fired or failed (the first call of fire()/fail() wins,
// later calls are ignored). Thread-safe.
class WatchState {
 public:
  WatchState() = default;
  WatchState(const WatchState&) = delete;
  WatchState& operator=(const WatchState&) = delete;

  // Marks the watch fired and wakes every waiter. No effect if already fired or failed.
  void fire();
  // Marks the watch failed with `error` and wakes every waiter. No effect if already done.
  void fail(const Error& error);
  // True once fired or failed.
  bool ready() const;
  // True if fired (not failed).
  bool fired() const;
  // Blocks until fired (returns true), or `timeout` passes (returns false). Throws the failure
  // error if the watch failed.
  bool wait_for(std::chrono::milliseconds timeout) const;
  // Wakes `waker` when this watch fires or fails (at once if it already has). Holds it weakly:
  // a waker its waiter dropped is forgotten (so repeated waits on one watch do not pile up).
  void wake_when_ready(const std::shared_ptr<WatchWaker>& waker);

 private:
  enum class Outcome { kPending, kFired, kFailed };
  // Sets the outcome and takes the wakers out (under mu_), for waking after the lock.
  std::vector<std::weak_ptr<WatchWaker>> finish_locked(Outcome outcome);

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  Outcome outcome_ = Outcome::kPending;
  std::optional<Error> error_;
  std::vector<std::weak_ptr<WatchWaker>> wakers_;
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_TXN_WATCH_STATE_H_
