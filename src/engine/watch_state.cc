#include "engine/watch_state.h"

namespace kvq::detail {

void WatchState::fire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (outcome_ != Outcome::kPending) return;
    outcome_ = Outcome::kFired;
  }
  cv_.notify_all();
}

void WatchState::fail(const Error& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (outcome_ != Outcome::kPending) return;
    outcome_ = Outcome::kFailed;
    error_ = error;
  }
  cv_.notify_all();
}

bool WatchState::ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outcome_ != Outcome::kPending;
}

bool WatchState::fired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outcome_ == Outcome::kFired;
}

bool WatchState::wait_for(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  auto done = [this] { return outcome_ != Outcome::kPending; };
  // A timeout of a century or more (e.g. milliseconds::max()) means "no timeout": now + timeout
  // in the clock's nanoseconds would overflow and expire at once.
  if (timeout >= std::chrono::hours(24 * 365 * 100)) {
    cv_.wait(lock, done);
  } else {
    cv_.wait_for(lock, timeout, done);
  }
  if (outcome_ == Outcome::kFailed) throw *error_;
  return outcome_ == Outcome::kFired;
}

}  // namespace kvq::detail
