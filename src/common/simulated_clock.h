// Internal: a simulated Clock, for tests and the simulator (kvq simulate). Time stands still
// until it is moved, so a lease that expires in 30 s expires at once and costs no real time.
//
// Used on its own (manual mode), advance() moves time and sleep_for(d) moves it by d; a wait that
// is not ready moves time to its deadline (no other simulated actor could make it ready).
//
// With run() (scheduled mode) it is a deterministic scheduler: the clients are real threads, but
// only one runs at a time. At every scheduling point (yield(), sleep_for, a wait that is not
// ready, a client's end) a generator seeded by run()'s seed picks the next client among those
// that can run: the runnable ones, sleepers whose time has come, and waiters whose deadline has
// come or that may have been made ready since they waited (another client ran a step). When none
// can run, simulated time jumps to the earliest deadline. With the same seed, the same clients
// doing the same thing take the same steps in the same order.
//
// Example:
//   kvq::common::SimulatedClock clock;
//   kvq::common::ScopedClock installed(clock);
//   clock.advance(std::chrono::seconds(31));             // every 30 s lease has now expired
//   clock.run(3, /*seed=*/42, [&](int client) { ... });  // three clients, one seed
//
// Thread safety: all methods may be called from any thread; run() is not reentrant (one run at a
// time per clock).
#ifndef KVQ_SRC_COMMON_SIMULATED_CLOCK_H_
#define KVQ_SRC_COMMON_SIMULATED_CLOCK_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <random>
#include <vector>

#include "common/clock.h"

namespace kvq::common {

class SimulatedClock final : public Clock {
 public:
  // 2026-01-01T00:00:00Z, the default wall time a simulated clock starts at.
  static constexpr std::chrono::seconds kDefaultWallStart{1'767'225'600};

  // A clock whose wall time starts at `wall_start` (steady time at an arbitrary origin).
  explicit SimulatedClock(WallTime wall_start = WallTime(kDefaultWallStart));

  WallTime wall_now() override;
  SteadyTime steady_now() override;
  void sleep_for(std::chrono::nanoseconds duration) override;
  bool wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                  SteadyTime deadline, const std::function<bool()>& ready) override;
  bool schedules_calling_thread() override { return self() >= 0; }

  // Moves simulated time forward by `duration` (ignored if not positive).
  void advance(std::chrono::nanoseconds duration);

  // Runs body(0), ..., body(clients - 1) on `clients` threads, one at a time, scheduled as the file
  // comment says from `seed`; each thread's kvq::common random generator is seeded from `seed` and
  // its index. Returns when every body has returned; then rethrows the first exception a body
  // threw, if any. Aborts the process if every unfinished client waits without a deadline (a
  // deadlock).
  void run(int clients, std::uint64_t seed, const std::function<void(int)>& body);
  // A scheduling point for the calling client of run(); a no-op on any other thread.
  void yield();
  // Scheduling decisions made so far (by every run()).
  std::uint64_t steps() const;

 private:
  enum class State { kRunnable, kSleeping, kWaiting, kDone };
  struct Client {
    State state = State::kRunnable;
    SteadyTime until = SteadyTime::max();  // when a sleeper or waiter may run again
    std::uint64_t epoch_seen = 0;          // epoch_ when a waiter started waiting
  };

  SteadyTime simulated_steady() const;
  int self() const;
  void park(int me, State state, SteadyTime until, bool after_step);
  void hand_over();
  std::vector<int> eligible() const;
  void jump_to_earliest_deadline();
  void client_main(int me, std::uint64_t seed, const std::function<void(int)>& body);

  const WallTime wall_start_;
  std::atomic<std::int64_t> elapsed_ns_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Client> clients_;  // guarded by mu_
  int current_ = -1;             // the client that may run; guarded by mu_
  std::uint64_t epoch_ = 0;      // steps that may have changed shared state; guarded by mu_
  std::uint64_t steps_ = 0;      // guarded by mu_
  std::mt19937_64 rng_;          // guarded by mu_
  std::exception_ptr failure_;   // guarded by mu_
};

}  // namespace kvq::common

#endif  // KVQ_SRC_COMMON_SIMULATED_CLOCK_H_
