#include "engine/pipeline/write_group.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/cpu_relax.h"

namespace kvq::pipeline {
namespace {

// Spinning helps only while the leader runs on another core: a batch takes a few microseconds.
constexpr int kSpins = 128;
constexpr std::uint8_t kFinished = Writer::kDone | Writer::kLeader;

}  // namespace

void WriteGroup::commit(Writer& w, const RunBatch& run) {
  bool lead_now = false;
  bool may_spin = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(&w);
    lead_now = !leading_;
    leading_ = true;
    may_spin = !lead_now && queue_.size() <= spinners_;
    w.spinning.store(may_spin, std::memory_order_relaxed);
  }
  if (!lead_now && await(w, may_spin) == Writer::kDone) return;
  lead(w, run);
}

std::uint8_t WriteGroup::await(Writer& w, bool may_spin) {
  if (may_spin) {
    const std::uint8_t s = spin(w);
    w.spinning.store(false, std::memory_order_relaxed);
    if (s & kFinished) return s;
  }
  // Sleep. Announce it first, so the leader knows to take the mutex and notify.
  std::uint8_t s = Writer::kQueued;
  if (!w.state.compare_exchange_strong(s, Writer::kSleeping, std::memory_order_acq_rel)) return s;
  sleeps_.fetch_add(1, std::memory_order_release);
  std::unique_lock<std::mutex> lock(w.mu);
  w.cv.wait(lock, [&] { return w.state.load(std::memory_order_relaxed) != Writer::kSleeping; });
  return w.state.load(std::memory_order_relaxed);
}

std::uint8_t WriteGroup::spin(Writer& w) const {
  // Phase 1: spin.
  for (int i = 0; i < kSpins; ++i) {
    const std::uint8_t s = w.state.load(std::memory_order_acquire);
    if (s & kFinished) return s;
    common::cpu_relax();
  }
  // Phase 2: yield the core (the leader or another client may need it) before sleeping: the
  // default budget is long enough for a memory-engine batch under 2-core oversubscription, short
  // next to a RocksDB fsync. It is real CPU time, not kvq's clock (common/clock.h): a simulated
  // clock stands still while a thread spins.
  const auto deadline = std::chrono::steady_clock::now() + yield_budget_;
  do {
    std::this_thread::yield();
    const std::uint8_t s = w.state.load(std::memory_order_acquire);
    if (s & kFinished) return s;
  } while (std::chrono::steady_clock::now() < deadline);
  return w.state.load(std::memory_order_acquire);
}

void WriteGroup::set_state(Writer& w, std::uint8_t state) {
  std::uint8_t old = w.state.load(std::memory_order_acquire);
  if (old != Writer::kSleeping &&
      w.state.compare_exchange_strong(old, state, std::memory_order_acq_rel)) {
    return;  // the writer was not asleep; from here on it may return and free `w`
  }
  // The writer sleeps (or went to sleep just now): publish under its mutex, so it cannot see the
  // new state, return and free `w` before we are done with the mutex.
  std::lock_guard<std::mutex> lock(w.mu);
  w.state.store(state, std::memory_order_release);
  w.cv.notify_one();
}

void WriteGroup::lead(Writer& w, const RunBatch& run) {
  // Real time, not kvq's clock (common/clock.h): a simulated clock may stand still.
  const auto turn_end = std::chrono::steady_clock::now() + lead_time_;
  Writer* own = &w;
  for (std::size_t turn = 1;; ++turn) {
    // Step 1: take the batch: the oldest queued writer and those queued after it.
    std::vector<Writer*> batch = take_batch();
    // Step 2: run it on this thread.
    run(batch);
    // Step 3: if writers queued meanwhile, lead their batch too (no thread switch between
    // batches) until the turn ends; then pass the leadership to the oldest of them. If that one
    // still spins, pass it at once: its thread is running, and this one can go back to its caller.
    Writer* next = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) {
        leading_ = false;
      } else {
        next = queue_.front();
      }
    }
    const bool keep_leading = next != nullptr && !next->spinning.load(std::memory_order_relaxed) &&
                              turn < batches_per_leader_ &&
                              std::chrono::steady_clock::now() < turn_end;
    if (next != nullptr && !keep_leading) set_state(*next, Writer::kLeader);
    // Step 4: release the followers (after a handover, so the next batch overlaps the wake-ups).
    for (Writer* p : batch) {
      if (p != own) set_state(*p, Writer::kDone);
    }
    if (!keep_leading) return;
    own = nullptr;
  }
}

std::size_t WriteGroup::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

std::vector<Writer*> WriteGroup::take_batch() {
  std::lock_guard<std::mutex> lock(mu_);
  const std::size_t n = std::min(queue_.size(), max_batch_);
  std::vector<Writer*> batch(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
  queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
  return batch;
}

}  // namespace kvq::pipeline
