#include "layers/combining/combiner.h"

namespace kvq::combining {

void Combiner::submit(Request& r, const Serve& serve) {
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&r);
  r.cv_.wait(lock, [&] { return r.done_ || queue_.front() == &r; });
  if (!r.done_) {
    // This thread leads: serve the group queued now, outside the lock (others keep queueing).
    std::vector<Request*> group = take_group();
    lock.unlock();
    std::exception_ptr error;
    try {
      serve(group);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    finish(group, error);
  }
  if (r.error_) std::rethrow_exception(r.error_);
}

// The requests at the front of the queue that fit in one group (left in the queue until done, so
// that later arrivals wait behind them).
std::vector<Request*> Combiner::take_group() {
  std::vector<Request*> group;
  std::size_t weight = 0;
  for (Request* q : queue_) {
    if (group.size() >= limits_.max_count) break;
    if (!group.empty() && weight + q->weight > limits_.max_weight) break;
    weight += q->weight;
    group.push_back(q);
  }
  return group;
}

// Marks the group done (with `error`), wakes its threads, and wakes the next leader. Under mu_.
void Combiner::finish(const std::vector<Request*>& group, const std::exception_ptr& error) {
  for (Request* q : group) {
    queue_.pop_front();
    q->error_ = error;
    q->done_ = true;
    q->cv_.notify_one();
  }
  ++groups_;
  requests_ += group.size();
  if (!queue_.empty()) queue_.front()->cv_.notify_one();
}

std::size_t Combiner::groups() const {
  std::lock_guard<std::mutex> lock(mu_);
  return groups_;
}

std::size_t Combiner::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

}  // namespace kvq::combining
