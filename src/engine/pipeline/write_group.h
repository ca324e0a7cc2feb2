// Internal: the group commit of the pipeline, after LevelDB's DBImpl::Write and RocksDB's
// WriteThread. There is no pipeline thread: the committer that finds no group in progress becomes
// the leader, takes every commit queued so far (its own first) as one batch, runs the batch itself,
// runs the batches of the commits that queued meanwhile too (a few in a row, so no thread switch
// lies between them) and then hands the leadership to the oldest commit still queued. The others
// (followers) wait for their result: the first few in the queue (one fewer than the machine has
// cores) spin briefly while the leader is likely running on another core, then yield (on a small
// machine the leader or another client may need the core), then wait on a condition variable; the
// others wait on it at once, so that many waiting committers do not take the cores from the leader.
// A leader whose next writer is still spinning hands it the lead at once rather than running its
// batch: that thread is running anyway, and the leader's own thread goes back to its caller, so
// two threads that commit in turn overlap one's commit with the other's next transaction.
// The leader wakes a follower with one atomic exchange; it touches the follower's mutex only when
// the follower already went to sleep. So a commit costs no thread switch unless it has to wait
// longer than the yield budget (a RocksDB fsync, for instance).
//
// Example (the pipeline's use):
//   WriteGroup group(/*max_batch=*/1024);
//   Writer w(&request);
//   group.commit(w, [&](std::vector<Writer*>& batch) { process(batch); });
//   if (w.error) throw *w.error;
//
// Thread safety: commit() is called concurrently from any number of threads; at most one batch
// runs at a time, and successive batches are ordered (each leader's writes happen before the next
// leader starts).
#ifndef KVQ_SRC_ENGINE_PIPELINE_WRITE_GROUP_H_
#define KVQ_SRC_ENGINE_PIPELINE_WRITE_GROUP_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace kvq::pipeline {

// One commit in the group: the request, and the result or error the leader leaves for it. Lives
// on the committer's stack for the duration of WriteGroup::commit().
struct Writer {
  explicit Writer(engine::CommitRequest* r) : request(r) {}
  engine::CommitRequest* request;
  engine::CommitResult result;
  std::optional<Error> error;  // set by the batch when the commit failed

  // Internal to WriteGroup.
  enum State : std::uint8_t { kQueued = 1, kSleeping = 2, kLeader = 4, kDone = 8 };
  std::atomic<std::uint8_t> state{kQueued};
  // Set (under the group's mutex) when the writer queues to spin, cleared when it stops spinning:
  // a leader hands the lead to such a writer rather than run its batch.
  std::atomic<bool> spinning{false};
  std::mutex mu;  // only used when the writer sleeps
  std::condition_variable cv;
};

class WriteGroup {
 public:
  // Runs a batch of writers (the leader's own first). Must set each writer's result or error and
  // must not throw.
  using RunBatch = std::function<void(std::vector<Writer*>& batch)>;

  // `max_batch` (>= 1): the most writers one batch takes. A leader runs the batches that queue
  // behind its own, in a row, until it has run `batches_per_leader` or led for `lead_time` (a
  // turn ends after the batch that crosses it) or finds the next writer spinning, then hands the
  // lead on; its own commit returns only then. A spinning writer yields its core for up to
  // `yield_budget` before it sleeps.
  explicit WriteGroup(std::size_t max_batch, std::size_t batches_per_leader = 8,
                      std::chrono::microseconds lead_time = std::chrono::microseconds(200),
                      std::chrono::microseconds yield_budget = std::chrono::microseconds(200))
      : max_batch_(max_batch),
        batches_per_leader_(std::max<std::size_t>(1, batches_per_leader)),
        lead_time_(lead_time),
        yield_budget_(yield_budget) {}
  WriteGroup(const WriteGroup&) = delete;
  WriteGroup& operator=(const WriteGroup&) = delete;

  // Queues `w` and returns once a batch containing it has run (on this thread if it led, else on
  // the leader's). `run` is called by this thread only if it becomes a leader.
  void commit(Writer& w, const RunBatch& run);

  // Writers that had to sleep (fell back to the condition variable), for tests and benchmarks.
  // Acquire: what a writer did before it went to sleep (stop spinning) is seen after this.
  std::uint64_t sleeps() const { return sleeps_.load(std::memory_order_acquire); }
  // Writers queued and not yet taken into a batch (for tests that must know a writer has queued
  // before they start the next).
  std::size_t queued() const;

 private:
  // Waits until `w` is done or made leader (spinning first if `may_spin`); returns the state
  // reached.
  std::uint8_t await(Writer& w, bool may_spin);
  // Spins, then yields, for up to yield_budget_; returns the state reached (maybe still queued).
  std::uint8_t spin(Writer& w) const;
  // Leads the batch starting with `w`, and the next ones while writers keep queueing (up to a
  // turn's limit, or until the next writer is one still spinning); then passes the leadership on.
  void lead(Writer& w, const RunBatch& run);
  // Takes the oldest queued writers, up to max_batch_, off the queue.
  std::vector<Writer*> take_batch();
  // Publishes `state` to `w`, waking it if it sleeps.
  static void set_state(Writer& w, std::uint8_t state);

  const std::size_t max_batch_;
  const std::size_t batches_per_leader_;
  const std::chrono::microseconds lead_time_;
  const std::chrono::microseconds yield_budget_;
  // Waiters at most this far back in the queue spin before they sleep: one per core besides the
  // leader's.
  const std::size_t spinners_ = std::max(2u, std::thread::hardware_concurrency()) - 1;
  mutable std::mutex mu_;
  std::deque<Writer*> queue_;  // waiting writers, oldest first; the leader's batch is taken off
  bool leading_ = false;       // a leader is running (then queue_ is served later)
  std::atomic<std::uint64_t> sleeps_{0};
};

}  // namespace kvq::pipeline

#endif  // KVQ_SRC_ENGINE_PIPELINE_WRITE_GROUP_H_
