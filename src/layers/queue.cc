#include "kvq/queue.h"

#include "layers/item_keys.h"
#include "layers/item_store.h"

namespace kvq {

using detail::Side;

Queue::Queue(std::shared_ptr<Database> db, Subspace subspace, QueueOptions options)
    : options_(options),
      store_(std::make_shared<detail::ItemStore>(
          std::move(db), detail::with_room_for_keys(std::move(subspace), kMaxOwnKeySize, "queue"),
          options, /*prioritized=*/false)) {}

Queue::Queue(QueueOptions options, std::shared_ptr<detail::ItemStore> store)
    : options_(options), store_(std::move(store)) {}

void Queue::push(std::string_view value) { store_->push(value, 0); }
void Queue::push(Transaction& tr, std::string_view value) { store_->push(tr, value, 0); }

std::optional<std::string> Queue::pop() { return store_->pop(Side::kFront, options_.pop_timeout); }
std::optional<std::string> Queue::pop(std::chrono::milliseconds timeout) {
  return store_->pop(Side::kFront, timeout);
}
std::optional<std::string> Queue::pop(Transaction& tr) { return store_->pop(tr, Side::kFront); }

std::optional<std::string> Queue::peek() {
  return store_->db().run([&](Transaction& tr) { return store_->peek(tr, Side::kFront); });
}
std::optional<std::string> Queue::peek(Transaction& tr) { return store_->peek(tr, Side::kFront); }

std::int64_t Queue::size() {
  return store_->db().run([&](Transaction& tr) { return store_->size(tr); });
}
std::int64_t Queue::size(Transaction& tr) { return store_->size(tr); }
bool Queue::empty() { return size() == 0; }
bool Queue::empty(Transaction& tr) { return size(tr) == 0; }

void Queue::clear() {
  store_->db().run([&](Transaction& tr) { store_->clear(tr); });
}
void Queue::clear(Transaction& tr) { store_->clear(tr); }

// ---- batches and blocking waits ----

namespace {

template <typename Values>
std::vector<detail::PushItem> push_items(const Values& values) {
  std::vector<detail::PushItem> out;
  out.reserve(values.size());
  for (std::string_view v : values) out.push_back({v, 0});
  return out;
}

}  // namespace

void Queue::push_batch(const std::vector<std::string>& values) {
  store_->push_batch(push_items(values));
}
void Queue::push_batch(std::span<const std::string_view> values) {
  store_->push_batch(push_items(values));
}
void Queue::push_batch(Transaction& tr, const std::vector<std::string>& values) {
  store_->push_batch(tr, push_items(values));
}
void Queue::push_batch(Transaction& tr, std::span<const std::string_view> values) {
  store_->push_batch(tr, push_items(values));
}

std::vector<std::string> Queue::pop_batch(std::size_t n) {
  return store_->pop_batch_within(Side::kFront, n, options_.pop_timeout);
}
std::vector<std::string> Queue::pop_batch(Transaction& tr, std::size_t n) {
  return store_->pop_batch(tr, Side::kFront, n);
}

std::optional<std::string> Queue::pop_wait(std::chrono::milliseconds timeout) {
  return store_->pop_wait(Side::kFront, timeout);
}

const Subspace& Queue::subspace() const { return store_->subspace(); }

}  // namespace kvq
