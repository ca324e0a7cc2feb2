#include "common/simulated_clock.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#include "common/random.h"

namespace kvq::common {

namespace {

// The client of a run() the calling thread is, if any.
thread_local const SimulatedClock* running_clock = nullptr;
thread_local int running_index = -1;

constexpr std::uint64_t kSeedSpread = 0x9e3779b97f4a7c15ULL;

}  // namespace

SimulatedClock::SimulatedClock(WallTime wall_start) : wall_start_(wall_start) {}

WallTime SimulatedClock::wall_now() {
  return wall_start_ + std::chrono::duration_cast<WallTime::duration>(
                           std::chrono::nanoseconds(elapsed_ns_.load(std::memory_order_acquire)));
}

SteadyTime SimulatedClock::steady_now() { return simulated_steady(); }

SteadyTime SimulatedClock::simulated_steady() const {
  // An origin an hour after the steady clock's epoch, so that now - 1 h is still representable.
  return SteadyTime(std::chrono::hours(1)) +
         std::chrono::nanoseconds(elapsed_ns_.load(std::memory_order_acquire));
}

void SimulatedClock::advance(std::chrono::nanoseconds duration) {
  if (duration.count() > 0) elapsed_ns_.fetch_add(duration.count(), std::memory_order_acq_rel);
}

void SimulatedClock::sleep_for(std::chrono::nanoseconds duration) {
  const int me = self();
  if (me < 0) {
    advance(duration);
  } else {
    park(me, State::kSleeping, steady_now() + std::max(duration, std::chrono::nanoseconds(0)),
         /*after_step=*/true);
  }
}

bool SimulatedClock::wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                                SteadyTime deadline, const std::function<bool()>& ready) {
  const int me = self();
  bool after_step = true;  // the first wait follows whatever the client did before it
  while (!ready()) {
    const SteadyTime now = steady_now();
    if (now >= deadline) return false;
    if (me >= 0) {
      lock.unlock();
      park(me, State::kWaiting, deadline, after_step);
      after_step = false;
      lock.lock();
    } else if (deadline == SteadyTime::max()) {
      cv.wait(lock, ready);  // manual mode, no deadline: only another real thread can help
    } else {
      advance(deadline - now);
    }
  }
  return true;
}

void SimulatedClock::yield() {
  const int me = self();
  if (me >= 0) park(me, State::kRunnable, SteadyTime::max(), /*after_step=*/true);
}

std::uint64_t SimulatedClock::steps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return steps_;
}

int SimulatedClock::self() const { return running_clock == this ? running_index : -1; }

void SimulatedClock::park(int me, State state, SteadyTime until, bool after_step) {
  std::unique_lock<std::mutex> lock(mu_);
  Client& client = clients_[static_cast<std::size_t>(me)];
  // A waiter that only found its condition still false changed nothing: other waiters need not
  // look again because of it (else two waiters would wake each other for ever).
  if (after_step) ++epoch_;
  client = Client{state, until, epoch_};
  hand_over();
  cv_.wait(lock, [&] { return current_ == me; });
  client.state = State::kRunnable;
}

void SimulatedClock::hand_over() {
  std::vector<int> can_run = eligible();
  if (can_run.empty()) {
    jump_to_earliest_deadline();
    can_run = eligible();
  }
  if (can_run.empty()) {
    const bool all_done = std::all_of(clients_.begin(), clients_.end(),
                                      [](const Client& c) { return c.state == State::kDone; });
    if (!all_done) {
      std::fputs("kvq: simulation deadlock: every client waits without a deadline\n", stderr);
      std::abort();
    }
    current_ = -1;
  } else {
    current_ = can_run[rng_() % can_run.size()];
    ++steps_;
  }
  cv_.notify_all();
}

std::vector<int> SimulatedClock::eligible() const {
  const SteadyTime now = simulated_steady();
  std::vector<int> out;
  for (std::size_t i = 0; i < clients_.size(); ++i) {
    const Client& c = clients_[i];
    const bool due = c.until <= now;
    if (c.state == State::kRunnable || (c.state == State::kSleeping && due) ||
        (c.state == State::kWaiting && (due || epoch_ > c.epoch_seen))) {
      out.push_back(static_cast<int>(i));
    }
  }
  return out;
}

void SimulatedClock::jump_to_earliest_deadline() {
  SteadyTime earliest = SteadyTime::max();
  for (const Client& c : clients_) {
    if (c.state == State::kSleeping || c.state == State::kWaiting) {
      earliest = std::min(earliest, c.until);
    }
  }
  if (earliest != SteadyTime::max()) advance(earliest - steady_now());
}

void SimulatedClock::client_main(int me, std::uint64_t seed, const std::function<void(int)>& body) {
  running_clock = this;
  running_index = me;
  seed_thread_random(seed + kSeedSpread * (static_cast<std::uint64_t>(me) + 1));
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return current_ == me; });
  }
  try {
    body(me);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_) failure_ = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mu_);
  clients_[static_cast<std::size_t>(me)].state = State::kDone;
  ++epoch_;
  hand_over();
  running_clock = nullptr;
  running_index = -1;
}

void SimulatedClock::run(int clients, std::uint64_t seed, const std::function<void(int)>& body) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    clients_.assign(static_cast<std::size_t>(clients), Client{});
    rng_.seed(seed);
    current_ = -1;
    failure_ = nullptr;
  }
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(clients));
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([this, i, seed, &body] { client_main(i, seed, body); });
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    hand_over();
  }
  for (std::thread& t : threads) t.join();
  std::exception_ptr failure;
  {
    std::lock_guard<std::mutex> lock(mu_);
    clients_.clear();
    failure = std::exchange(failure_, nullptr);
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace kvq::common
