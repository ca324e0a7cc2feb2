// Internal: the group commit of the pipeline, after LevelDB's DBImpl::Write and RocksDB's
// WriteThread. There is no pipeline thread: the committer that finds no group in progress becomes
// the leader, takes every commit queued so far (its own first) as one batch, runs the batch itself
// and hands the leadership to the oldest commit still queued. The others (followers) wait for
// their result: a short spin while the leader is likely running on another core, then yields
// (on a small machine the leader or another client may need the core), then a blocking wait on a
// condition variable. The leader wakes a follower with one atomic exchange; it touches the
// follower's mutex only when the follower already went to sleep. So a commit costs no thread
// switch unless it has to wait longer than the yield budget (a RocksDB fsync, for instance).
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

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
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
  std::mutex mu;  // only used when the writer sleeps
  std::condition_variable cv;
};

class WriteGroup {
 public:
  // Runs a batch of writers (the leader's own first). Must set each writer's result or error and
  // must not throw.
  using RunBatch = std::function<void(std::vector<Writer*>& batch)>;

  // `max_batch` (>= 1): the most writers one batch takes.
  explicit WriteGroup(std::size_t max_batch) : max_batch_(max_batch) {}
  WriteGroup(const WriteGroup&) = delete;
  WriteGroup& operator=(const WriteGroup&) = delete;

  // Queues `w` and returns once a batch containing it has run (on this thread if it led, else on
  // the leader's). `run` is called by this thread only if it becomes a leader.
  void commit(Writer& w, const RunBatch& run);

  // Writers that had to sleep (fell back to the condition variable), for tests and benchmarks.
  std::uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }

 private:
  // Waits until `w` is done or made leader; returns the state reached.
  std::uint8_t await(Writer& w);
  // Leads one batch starting with `w`, then passes the leadership on.
  void lead(Writer& w, const RunBatch& run);
  // Publishes `state` to `w`, waking it if it sleeps.
  static void set_state(Writer& w, std::uint8_t state);

  const std::size_t max_batch_;
  std::mutex mu_;
  std::deque<Writer*> queue_;  // waiting writers, oldest first; the leader's batch is taken off
  bool leading_ = false;       // a leader is running (then queue_ is served later)
  std::atomic<std::uint64_t> sleeps_{0};
};

}  // namespace kvq::pipeline

#endif  // KVQ_SRC_ENGINE_PIPELINE_WRITE_GROUP_H_
