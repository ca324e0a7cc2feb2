#include "engine/pipeline/write_group.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace kvq::pipeline {
namespace {

// Spinning helps only while the leader runs on another core: a batch takes a few microseconds.
constexpr int kSpins = 128;
// Then yield the core for up to this long (the leader or another client may need it) before
// sleeping: long enough for a memory-engine batch under 2-core oversubscription, short next to a
// RocksDB fsync.
constexpr std::chrono::microseconds kYieldBudget{200};

constexpr std::uint8_t kFinished = Writer::kDone | Writer::kLeader;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace

void WriteGroup::commit(Writer& w, const RunBatch& run) {
  bool lead_now = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(&w);
    lead_now = !leading_;
    leading_ = true;
  }
  if (!lead_now && await(w) == Writer::kDone) return;
  lead(w, run);
}

std::uint8_t WriteGroup::await(Writer& w) {
  // Phase 1: spin.
  for (int i = 0; i < kSpins; ++i) {
    const std::uint8_t s = w.state.load(std::memory_order_acquire);
    if (s & kFinished) return s;
    cpu_relax();
  }
  // Phase 2: yield. The budget is real CPU time, not kvq's clock (common/clock.h): a simulated
  // clock stands still while a thread spins.
  const auto deadline = std::chrono::steady_clock::now() + kYieldBudget;
  do {
    std::this_thread::yield();
    const std::uint8_t s = w.state.load(std::memory_order_acquire);
    if (s & kFinished) return s;
  } while (std::chrono::steady_clock::now() < deadline);
  // Phase 3: sleep. Announce it first, so the leader knows to take the mutex and notify.
  std::uint8_t s = Writer::kQueued;
  if (!w.state.compare_exchange_strong(s, Writer::kSleeping, std::memory_order_acq_rel)) return s;
  sleeps_.fetch_add(1, std::memory_order_relaxed);
  std::unique_lock<std::mutex> lock(w.mu);
  w.cv.wait(lock, [&] { return w.state.load(std::memory_order_relaxed) != Writer::kSleeping; });
  return w.state.load(std::memory_order_relaxed);
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
  // Step 1: take the batch: `w` (the oldest queued writer) and those queued after it.
  std::vector<Writer*> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::size_t n = std::min(queue_.size(), max_batch_);
    batch.assign(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
  }
  // Step 2: run it on this thread.
  run(batch);
  // Step 3: pass the leadership to the oldest writer that queued meanwhile, if any.
  Writer* next = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.empty()) {
      leading_ = false;
    } else {
      next = queue_.front();
    }
  }
  if (next != nullptr) set_state(*next, Writer::kLeader);
  // Step 4: release the followers (after the handover, so the next batch overlaps the wake-ups).
  for (Writer* p : batch) {
    if (p != &w) set_state(*p, Writer::kDone);
  }
}

}  // namespace kvq::pipeline
