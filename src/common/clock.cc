#include "common/clock.h"

#include <algorithm>
#include <atomic>
#include <thread>

namespace kvq::common {

namespace {

class RealClock final : public Clock {
 public:
  WallTime wall_now() override { return std::chrono::system_clock::now(); }
  SteadyTime steady_now() override { return std::chrono::steady_clock::now(); }
  void sleep_for(std::chrono::nanoseconds duration) override {
    if (duration.count() > 0) std::this_thread::sleep_for(duration);
  }
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  SteadyTime deadline, const std::function<bool()>& ready) override {
    if (deadline == SteadyTime::max()) {
      cv.wait(lock, ready);
      return true;
    }
    return cv.wait_until(lock, deadline, ready);
  }
};

RealClock real_clock;
std::atomic<Clock*> installed{&real_clock};

}  // namespace

Clock& clock() { return *installed.load(std::memory_order_acquire); }

bool real_clock_installed() { return &clock() == &real_clock; }

SteadyTime deadline_after(std::chrono::milliseconds timeout) {
  if (timeout >= std::chrono::hours(24 * 365 * 100)) return SteadyTime::max();
  return clock().steady_now() + timeout;
}

std::chrono::milliseconds time_left(SteadyTime deadline) {
  const auto d = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock().steady_now());
  return d.count() > 0 ? d : std::chrono::milliseconds(0);
}

std::chrono::milliseconds timeout_until(SteadyTime deadline) {
  if (deadline == SteadyTime::max()) return std::chrono::milliseconds(0);
  return std::max(time_left(deadline), std::chrono::milliseconds(1));
}

SteadyTime deadline_of_timeout(std::chrono::milliseconds timeout) {
  return timeout.count() == 0 ? SteadyTime::max() : deadline_after(timeout);
}

std::int64_t wall_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             clock().wall_now().time_since_epoch())
      .count();
}

ScopedClock::ScopedClock(Clock& clock)
    : previous_(installed.exchange(&clock, std::memory_order_acq_rel)) {}

ScopedClock::~ScopedClock() { installed.store(previous_, std::memory_order_release); }

}  // namespace kvq::common
