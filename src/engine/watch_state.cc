#include "engine/watch_state.h"

#include "common/clock.h"

namespace kvq::detail {

namespace {

void wake_all(const std::vector<std::weak_ptr<WatchWaker>>& wakers) {
  for (const auto& weak : wakers) {
    if (auto w = weak.lock()) w->wake();
  }
}

}  // namespace

void WatchWaker::wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

void WatchWaker::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  common::clock().wait_until(lock, cv_, common::deadline_after(timeout), [this] { return woken_; });
}

std::vector<std::weak_ptr<WatchWaker>> WatchState::finish_locked(Outcome outcome) {
  outcome_ = outcome;
  return std::move(wakers_);
}

void WatchState::fire() {
  std::vector<std::weak_ptr<WatchWaker>> wakers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (outcome_ != Outcome::kPending) return;
    wakers = finish_locked(Outcome::kFired);
  }
  cv_.notify_all();
  wake_all(wakers);
}

void WatchState::fail(const Error& error) {
  std::vector<std::weak_ptr<WatchWaker>> wakers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (outcome_ != Outcome::kPending) return;
    error_ = error;
    wakers = finish_locked(Outcome::kFailed);
  }
  cv_.notify_all();
  wake_all(wakers);
}

void WatchState::wake_when_ready(const std::shared_ptr<WatchWaker>& waker) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (outcome_ == Outcome::kPending) {
      std::erase_if(wakers_, [](const std::weak_ptr<WatchWaker>& w) { return w.expired(); });
      wakers_.emplace_back(waker);
      return;
    }
  }
  waker->wake();
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
  // A timeout of a century or more (e.g. milliseconds::max()) means "no timeout".
  common::clock().wait_until(lock, cv_, common::deadline_after(timeout),
                             [this] { return outcome_ != Outcome::kPending; });
  if (outcome_ == Outcome::kFailed) throw *error_;
  return outcome_ == Outcome::kFired;
}

}  // namespace kvq::detail
