// Internal: the one place kvq's own code reads time, sleeps, and waits with a deadline, so that
// tests and the simulator (kvq simulate) can run kvq in simulated time. The installed clock is the
// real one (std::chrono's clocks, std::this_thread::sleep_for, std::condition_variable) unless a
// ScopedClock installs another for its lifetime (common/simulated_clock.h has the simulated one).
//
// Example:
//   const auto deadline = kvq::common::clock().steady_now() + std::chrono::seconds(1);
//   kvq::common::clock().sleep_for(std::chrono::milliseconds(5));
//   std::unique_lock<std::mutex> lock(mu);
//   bool done = kvq::common::clock().wait_until(lock, cv, deadline, [&] { return done_; });
//
// Thread safety: clock() and every Clock method may be called from any thread. Installing a clock
// (ScopedClock) is not synchronised with its use: install it before any kvq object that reads
// time is created, and remove it after the last one is gone.
#ifndef KVQ_SRC_COMMON_CLOCK_H_
#define KVQ_SRC_COMMON_CLOCK_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

namespace kvq::common {

using WallTime = std::chrono::system_clock::time_point;
using SteadyTime = std::chrono::steady_clock::time_point;

// A source of time. Implementations: the real clock (the default) and SimulatedClock.
class Clock {
 public:
  virtual ~Clock() = default;
  // The time of day (for times stored in the database: lease deadlines, request ages).
  virtual WallTime wall_now() = 0;
  // A monotonic time (for timeouts, budgets and time-based versions).
  virtual SteadyTime steady_now() = 0;
  // Blocks the calling thread for `duration` (no-op if it is not positive).
  virtual void sleep_for(std::chrono::nanoseconds duration) = 0;
  // With `lock` held on entry (it is held again on return), waits until `ready()` is true or
  // steady_now() reaches `deadline` (SteadyTime::max(): no deadline). Whoever makes ready() true
  // does so under `lock`'s mutex and then notifies `cv`. Returns ready().
  virtual bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                          SteadyTime deadline, const std::function<bool()>& ready) = 0;
  // Whether the calling thread is scheduled by this clock, so that it must not block other than
  // through sleep_for and wait_until (true only on a client thread of SimulatedClock::run, whose
  // scheduler runs one thread at a time).
  virtual bool schedules_calling_thread() { return false; }
};

// The installed clock: the real clock unless a ScopedClock is alive.
Clock& clock();
// Whether clock() is the real clock (no ScopedClock alive).
bool real_clock_installed();

// The steady deadline `timeout` from now; SteadyTime::max() for a timeout of a century or more
// (e.g. milliseconds::max(), which would overflow now + timeout).
SteadyTime deadline_after(std::chrono::milliseconds timeout);

// Whole milliseconds from the installed clock's now until `deadline`, rounded up; 0 once it has
// passed.
std::chrono::milliseconds time_left(SteadyTime deadline);

// A transaction timeout (TransactionOptions::timeout) that ends it at `deadline`: 0 (none) for
// SteadyTime::max(), else time_left(deadline) but at least 1 ms (0 would mean none).
std::chrono::milliseconds timeout_until(SteadyTime deadline);
// The other way: the deadline of a transaction timeout from now, SteadyTime::max() for 0 (none).
SteadyTime deadline_of_timeout(std::chrono::milliseconds timeout);

// Microseconds of the installed clock's wall time since the Unix epoch.
std::int64_t wall_now_us();

// Installs `clock` as clock() for its lifetime, then restores the previous one. `clock` must
// outlive it. See the file comment for when it may be installed.
class ScopedClock {
 public:
  explicit ScopedClock(Clock& clock);
  ~ScopedClock();
  ScopedClock(const ScopedClock&) = delete;
  ScopedClock& operator=(const ScopedClock&) = delete;

 private:
  Clock* previous_;
};

}  // namespace kvq::common

#endif  // KVQ_SRC_COMMON_CLOCK_H_
