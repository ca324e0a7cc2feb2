// PriorityQueue's work-queue methods (kvq/priority_queue.h, "work queues"): thin calls into
// WorkItems.
#include "kvq/priority_queue.h"
#include "layers/item_store.h"

namespace kvq {

using detail::Side;
using detail::WorkItems;

void PriorityQueue::push(std::string_view value, std::int64_t priority,
                         const PushOptions& options) {
  if (auto due = WorkItems::due_us(options)) {
    store_->work().push_delayed(value, priority, *due);
  } else {
    store_->push(value, priority);
  }
}

void PriorityQueue::push(Transaction& tr, std::string_view value, std::int64_t priority,
                         const PushOptions& options) {
  if (auto due = WorkItems::due_us(options)) {
    store_->work().push_delayed(tr, value, priority, *due);
  } else {
    store_->push(tr, value, priority);
  }
}

std::optional<Lease> PriorityQueue::take_min(std::chrono::milliseconds vt) {
  return store_->take(Side::kFront, vt);
}
std::optional<Lease> PriorityQueue::take_min(Transaction& tr, std::chrono::milliseconds vt) {
  return store_->take(tr, Side::kFront, vt);
}
std::vector<Lease> PriorityQueue::take_min_batch(std::size_t n, std::chrono::milliseconds vt) {
  return store_->take_batch(Side::kFront, n, vt);
}
std::vector<Lease> PriorityQueue::take_min_batch(Transaction& tr, std::size_t n,
                                                 std::chrono::milliseconds vt) {
  return store_->take_batch(tr, Side::kFront, n, vt);
}
std::optional<Lease> PriorityQueue::take_min_wait(std::chrono::milliseconds vt,
                                                  std::chrono::milliseconds timeout) {
  return store_->take_wait(Side::kFront, vt, timeout);
}

std::optional<Lease> PriorityQueue::take_max(std::chrono::milliseconds vt) {
  return store_->take(Side::kBack, vt);
}
std::optional<Lease> PriorityQueue::take_max(Transaction& tr, std::chrono::milliseconds vt) {
  return store_->take(tr, Side::kBack, vt);
}
std::vector<Lease> PriorityQueue::take_max_batch(std::size_t n, std::chrono::milliseconds vt) {
  return store_->take_batch(Side::kBack, n, vt);
}
std::vector<Lease> PriorityQueue::take_max_batch(Transaction& tr, std::size_t n,
                                                 std::chrono::milliseconds vt) {
  return store_->take_batch(tr, Side::kBack, n, vt);
}
std::optional<Lease> PriorityQueue::take_max_wait(std::chrono::milliseconds vt,
                                                  std::chrono::milliseconds timeout) {
  return store_->take_wait(Side::kBack, vt, timeout);
}

void PriorityQueue::ack(const Lease& lease) { store_->work().ack(lease); }
void PriorityQueue::ack(Transaction& tr, const Lease& lease) { store_->work().ack(tr, lease); }

void PriorityQueue::nack(const Lease& lease, std::chrono::milliseconds delay,
                         std::string_view reason) {
  store_->work().nack(lease, delay, reason);
}
void PriorityQueue::nack(Transaction& tr, const Lease& lease, std::chrono::milliseconds delay,
                         std::string_view reason) {
  store_->work().nack(tr, lease, delay, reason);
}

WallClock::time_point PriorityQueue::extend(const Lease& lease, std::chrono::milliseconds vt) {
  return store_->work().extend(lease, vt);
}
WallClock::time_point PriorityQueue::extend(Transaction& tr, const Lease& lease,
                                            std::chrono::milliseconds vt) {
  return store_->work().extend(tr, lease, vt);
}

Queue PriorityQueue::dead_letters() const {
  // Not through Queue's public constructor: the dead letters' subspace is this queue's prefix and
  // a few bytes, and their keys are counted in kMaxOwnKeySize already.
  return Queue(
      {}, std::make_shared<detail::ItemStore>(store_->work().db(), store_->work().dead_subspace(),
                                              QueueOptions{}, /*prioritized=*/false));
}

std::vector<DeadLetter> PriorityQueue::peek_dead_letters(int limit) {
  return store_->db().run(
      [&](Transaction& tr) { return store_->work().peek_dead_letters(tr, limit); });
}

std::int64_t PriorityQueue::redrive(std::int64_t n) { return store_->work().redrive(n); }

QueueStats PriorityQueue::stats() {
  return store_->db().run([&](Transaction& tr) { return store_->work().stats(tr); });
}
QueueStats PriorityQueue::stats(Transaction& tr) { return store_->work().stats(tr); }

}  // namespace kvq
