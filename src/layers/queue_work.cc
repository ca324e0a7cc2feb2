// Queue's work-queue methods (kvq/queue.h, "work queues"): thin calls into WorkItems.
#include "kvq/queue.h"
#include "layers/item_store.h"

namespace kvq {

using detail::Side;
using detail::WorkItems;

void Queue::push(std::string_view value, const PushOptions& options) {
  if (auto due = WorkItems::due_us(options)) {
    store_->work().push_delayed(value, 0, *due);
  } else {
    store_->push(value, 0);
  }
}

void Queue::push(Transaction& tr, std::string_view value, const PushOptions& options) {
  if (auto due = WorkItems::due_us(options)) {
    store_->work().push_delayed(tr, value, 0, *due);
  } else {
    store_->push(tr, value, 0);
  }
}

std::optional<Lease> Queue::take(std::chrono::milliseconds vt) {
  return store_->take(Side::kFront, vt);
}
std::optional<Lease> Queue::take(Transaction& tr, std::chrono::milliseconds vt) {
  return store_->take(tr, Side::kFront, vt);
}

std::vector<Lease> Queue::take_batch(std::size_t n, std::chrono::milliseconds vt) {
  return store_->take_batch(Side::kFront, n, vt);
}
std::vector<Lease> Queue::take_batch(Transaction& tr, std::size_t n, std::chrono::milliseconds vt) {
  return store_->take_batch(tr, Side::kFront, n, vt);
}

std::optional<Lease> Queue::take_wait(std::chrono::milliseconds vt,
                                      std::chrono::milliseconds timeout) {
  return store_->take_wait(Side::kFront, vt, timeout);
}

void Queue::ack(const Lease& lease) { store_->work().ack(lease); }
void Queue::ack(Transaction& tr, const Lease& lease) { store_->work().ack(tr, lease); }

void Queue::nack(const Lease& lease, std::chrono::milliseconds delay, std::string_view reason) {
  store_->work().nack(lease, delay, reason);
}
void Queue::nack(Transaction& tr, const Lease& lease, std::chrono::milliseconds delay,
                 std::string_view reason) {
  store_->work().nack(tr, lease, delay, reason);
}

WallClock::time_point Queue::extend(const Lease& lease, std::chrono::milliseconds vt) {
  return store_->work().extend(lease, vt);
}
WallClock::time_point Queue::extend(Transaction& tr, const Lease& lease,
                                    std::chrono::milliseconds vt) {
  return store_->work().extend(tr, lease, vt);
}

Queue Queue::dead_letters() const {
  // Not through Queue's public constructor: the dead letters' subspace is this queue's prefix and
  // a few bytes, and their keys are counted in kMaxOwnKeySize already.
  return Queue(
      {}, std::make_shared<detail::ItemStore>(store_->work().db(), store_->work().dead_subspace(),
                                              QueueOptions{}, /*prioritized=*/false));
}

std::vector<DeadLetter> Queue::peek_dead_letters(int limit) {
  return store_->db().run(
      [&](Transaction& tr) { return store_->work().peek_dead_letters(tr, limit); });
}

std::int64_t Queue::redrive(std::int64_t n) { return store_->work().redrive(n); }
std::int64_t Queue::redrive(Transaction& tr, std::int64_t n) {
  return store_->work().redrive(tr, n);
}

QueueStats Queue::stats() {
  return store_->db().run([&](Transaction& tr) { return store_->work().stats(tr); });
}
QueueStats Queue::stats(Transaction& tr) { return store_->work().stats(tr); }

}  // namespace kvq
