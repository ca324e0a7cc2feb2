// Internal: flat combining within one process (Hendler et al., SPAA 2010; the writer groups of
// LevelDB's DBImpl::Write). Threads that submit requests to one Combiner at once queue up; the
// thread at the front leads: it takes the requests queued at that moment (up to a count and a
// weight), serves them all with one call of its serve function (one transaction, for the queue
// layers), marks each done, wakes their threads and the next leader, and returns. A follower only
// waits on its own condition variable: no extra thread, no polling.
//
// Requests are served in the order they were submitted. If serve throws, every request of its
// group gets that exception (the group is one transaction: it took effect for all or none).
//
// Example:
//   struct Add : combining::Request { int value; };
//   combining::Combiner c({.max_count = 64});
//   Add r; r.value = 3;
//   c.submit(r, [&](std::vector<combining::Request*>& group) { ... one transaction ... });
#ifndef KVQ_SRC_LAYERS_COMBINING_COMBINER_H_
#define KVQ_SRC_LAYERS_COMBINING_COMBINER_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <vector>

namespace kvq::combining {

// One submitted operation; derive to add its arguments and results. Owned by its submitter (on
// its stack), which the Combiner does not copy.
struct Request {
  // What the request counts against GroupLimits::max_weight (e.g. its value's bytes).
  std::size_t weight = 0;

 private:
  friend class Combiner;
  bool done_ = false;
  std::exception_ptr error_;
  std::condition_variable cv_;
};

// Bounds of one group. The first request of a group is always taken (so heavy requests are served,
// alone).
struct GroupLimits {
  std::size_t max_count = 128;
  std::size_t max_weight = static_cast<std::size_t>(-1);
};

class Combiner {
 public:
  // Serves the requests of one group, in order; its effect on each request is the request's
  // result. Called by one thread at a time.
  using Serve = std::function<void(std::vector<Request*>& group)>;

  explicit Combiner(GroupLimits limits) : limits_(limits) {}
  Combiner(const Combiner&) = delete;
  Combiner& operator=(const Combiner&) = delete;

  // Returns once `r` has been served, by this thread (leading a group) or by another thread's
  // group; rethrows what that group's serve threw. Thread-safe.
  void submit(Request& r, const Serve& serve);

  // Groups served and requests served so far (for benchmarks and tests).
  std::size_t groups() const;
  std::size_t requests() const;

 private:
  std::vector<Request*> take_group();
  void finish(const std::vector<Request*>& group, const std::exception_ptr& error);

  GroupLimits limits_;
  mutable std::mutex mu_;
  std::deque<Request*> queue_;  // submitted, not yet done; the front one leads
  std::size_t groups_ = 0, requests_ = 0;
};

}  // namespace kvq::combining

#endif  // KVQ_SRC_LAYERS_COMBINING_COMBINER_H_
