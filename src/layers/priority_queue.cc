#include "kvq/priority_queue.h"

#include "layers/item_keys.h"
#include "layers/item_store.h"

namespace kvq {

using detail::Side;

PriorityQueue::PriorityQueue(std::shared_ptr<Database> db, Subspace subspace,
                             PriorityQueueOptions options)
    : options_(options),
      store_(std::make_shared<detail::ItemStore>(
          std::move(db),
          detail::with_room_for_keys(std::move(subspace), Queue::kMaxOwnKeySize, "priority queue"),
          options, /*prioritized=*/true)) {}

void PriorityQueue::push(std::string_view value, std::int64_t priority) {
  store_->push(value, priority);
}
void PriorityQueue::push(Transaction& tr, std::string_view value, std::int64_t priority) {
  store_->push(tr, value, priority);
}

std::optional<std::string> PriorityQueue::pop_min() {
  return store_->pop(Side::kFront, options_.pop_timeout);
}
std::optional<std::string> PriorityQueue::pop_min(std::chrono::milliseconds timeout) {
  return store_->pop(Side::kFront, timeout);
}
std::optional<std::string> PriorityQueue::pop_min(Transaction& tr) {
  return store_->pop(tr, Side::kFront);
}
std::optional<std::string> PriorityQueue::pop_max() {
  return store_->pop(Side::kBack, options_.pop_timeout);
}
std::optional<std::string> PriorityQueue::pop_max(std::chrono::milliseconds timeout) {
  return store_->pop(Side::kBack, timeout);
}
std::optional<std::string> PriorityQueue::pop_max(Transaction& tr) {
  return store_->pop(tr, Side::kBack);
}

std::optional<std::string> PriorityQueue::peek_min() {
  return store_->db().run([&](Transaction& tr) { return store_->peek(tr, Side::kFront); });
}
std::optional<std::string> PriorityQueue::peek_min(Transaction& tr) {
  return store_->peek(tr, Side::kFront);
}
std::optional<std::string> PriorityQueue::peek_max() {
  return store_->db().run([&](Transaction& tr) { return store_->peek(tr, Side::kBack); });
}
std::optional<std::string> PriorityQueue::peek_max(Transaction& tr) {
  return store_->peek(tr, Side::kBack);
}

std::int64_t PriorityQueue::size() {
  return store_->db().run([&](Transaction& tr) { return store_->size(tr); });
}
std::int64_t PriorityQueue::size(Transaction& tr) { return store_->size(tr); }
bool PriorityQueue::empty() { return size() == 0; }
bool PriorityQueue::empty(Transaction& tr) { return size(tr) == 0; }

void PriorityQueue::clear() {
  store_->db().run([&](Transaction& tr) { store_->clear(tr); });
}
void PriorityQueue::clear(Transaction& tr) { store_->clear(tr); }

// ---- batches and blocking waits ----

namespace {

std::vector<detail::PushItem> push_items(
    const std::vector<std::pair<std::string, std::int64_t>>& items) {
  std::vector<detail::PushItem> out;
  out.reserve(items.size());
  for (const auto& [value, priority] : items) out.push_back({value, priority});
  return out;
}

}  // namespace

void PriorityQueue::push_batch(const std::vector<std::pair<std::string, std::int64_t>>& items) {
  store_->push_batch(push_items(items));
}
void PriorityQueue::push_batch(Transaction& tr,
                               const std::vector<std::pair<std::string, std::int64_t>>& items) {
  store_->push_batch(tr, push_items(items));
}

std::vector<std::string> PriorityQueue::pop_min_batch(std::size_t n) {
  return store_->pop_batch_within(Side::kFront, n, options_.pop_timeout);
}
std::vector<std::string> PriorityQueue::pop_min_batch(Transaction& tr, std::size_t n) {
  return store_->pop_batch(tr, Side::kFront, n);
}
std::vector<std::string> PriorityQueue::pop_max_batch(std::size_t n) {
  return store_->pop_batch_within(Side::kBack, n, options_.pop_timeout);
}
std::vector<std::string> PriorityQueue::pop_max_batch(Transaction& tr, std::size_t n) {
  return store_->pop_batch(tr, Side::kBack, n);
}

std::optional<std::string> PriorityQueue::pop_min_wait(std::chrono::milliseconds timeout) {
  return store_->pop_wait(Side::kFront, timeout);
}
std::optional<std::string> PriorityQueue::pop_max_wait(std::chrono::milliseconds timeout) {
  return store_->pop_wait(Side::kBack, timeout);
}

const Subspace& PriorityQueue::subspace() const { return store_->subspace(); }

}  // namespace kvq
