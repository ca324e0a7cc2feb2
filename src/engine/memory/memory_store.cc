#include "engine/memory/memory_store.h"

#include <mutex>

namespace kvq::engine {

class MemoryStore::Snapshot final : public pipeline::StoreSnapshot {
 public:
  Snapshot(const MemoryStore* store, Version version) : store_(store), version_(version) {}

  Version version() const override { return version_; }

  std::optional<std::string> get(std::string_view key) const override {
    std::shared_lock<std::shared_mutex> lock(store_->mu_);
    check_not_too_old();
    auto it = store_->data_.find(key);
    if (it == store_->data_.end()) return std::nullopt;
    const Entry* e = visible(it->second, version_);
    if (e == nullptr) return std::nullopt;
    return e->value;
  }

  std::vector<KeyValue> get_range(std::string_view begin, std::string_view end, int limit,
                                  bool reverse) const override {
    std::vector<KeyValue> out;
    if (!(begin < end)) return out;
    const std::size_t max = limit > 0 ? static_cast<std::size_t>(limit) : SIZE_MAX;
    std::shared_lock<std::shared_mutex> lock(store_->mu_);
    check_not_too_old();
    auto lo = store_->data_.lower_bound(begin);
    auto hi = store_->data_.lower_bound(end);
    if (!reverse) {
      for (auto it = lo; it != hi && out.size() < max; ++it) {
        const Entry* e = visible(it->second, version_);
        if (e != nullptr && e->value) out.push_back({it->first, *e->value});
      }
    } else {
      for (auto it = hi; it != lo && out.size() < max;) {
        --it;
        const Entry* e = visible(it->second, version_);
        if (e != nullptr && e->value) out.push_back({it->first, *e->value});
      }
    }
    return out;
  }

 private:
  void check_not_too_old() const {
    if (version_ < store_->floor_) {
      throw Error(ErrorCode::kTransactionTooOld,
                  "memory store: version " + std::to_string(version_) +
                      " was garbage-collected (floor " + std::to_string(store_->floor_) + ")");
    }
  }

  const MemoryStore* store_;
  Version version_;
};

const MemoryStore::Entry* MemoryStore::visible(const Chain& chain, Version version) {
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if (it->version <= version) return &*it;
  }
  return nullptr;
}

Version MemoryStore::latest_version() const { return latest_.load(std::memory_order_acquire); }

std::shared_ptr<const pipeline::StoreSnapshot> MemoryStore::snapshot() const {
  return std::make_shared<Snapshot>(this, latest_.load(std::memory_order_acquire));
}

void MemoryStore::append(const std::string& key, Chain& chain, Version version,
                         std::optional<std::string> value) {
  if (!chain.empty() && chain.back().version == version) {
    // Rewritten within the batch. A tombstone must still be collected, even if the key was
    // created by this same batch (its chain was not queued then).
    chain.back().value = std::move(value);
    if (!chain.back().value) superseded_.emplace_back(version, key);
    return;
  }
  chain.push_back({version, std::move(value)});
  if (chain.size() > 1 || !chain.back().value) superseded_.emplace_back(version, key);
}

void MemoryStore::apply(Version version, const std::vector<pipeline::StoreWrite>& writes) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (version <= latest_.load(std::memory_order_relaxed)) {
    throw Error(ErrorCode::kInternalError, "memory store: versions must increase");
  }
  for (const pipeline::StoreWrite& w : writes) {
    switch (w.kind) {
      case pipeline::StoreWrite::Kind::kSet: {
        auto it = data_.find(w.key);
        if (it == data_.end()) it = data_.emplace(w.key, Chain{}).first;
        append(it->first, it->second, version, w.value);
        break;
      }
      case pipeline::StoreWrite::Kind::kClear: {
        auto it = data_.find(w.key);
        if (it != data_.end() && it->second.back().value) {
          append(it->first, it->second, version, std::nullopt);
        }
        break;
      }
      case pipeline::StoreWrite::Kind::kClearRange: {
        if (!(w.key < w.value)) break;
        auto hi = data_.lower_bound(w.value);
        for (auto it = data_.lower_bound(w.key); it != hi; ++it) {
          if (it->second.back().value) append(it->first, it->second, version, std::nullopt);
        }
        break;
      }
    }
  }
  latest_.store(version, std::memory_order_release);
}

void MemoryStore::forget_before(Version version) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  Version floor = std::min(version, latest_.load(std::memory_order_relaxed));
  if (floor <= floor_) return;
  floor_ = floor;
  while (!superseded_.empty() && superseded_.front().first <= floor_) {
    std::string key = std::move(superseded_.front().second);
    superseded_.pop_front();
    compact(key);
  }
}

void MemoryStore::compact(const std::string& key) {
  auto it = data_.find(key);
  if (it == data_.end()) return;
  Chain& chain = it->second;
  // Index of the newest entry at or below the floor; everything before it is unreadable.
  std::size_t keep = 0;
  bool found = false;
  for (std::size_t i = chain.size(); i-- > 0;) {
    if (chain[i].version <= floor_) {
      keep = i;
      found = true;
      break;
    }
  }
  if (!found) return;
  if (keep > 0) chain.erase(chain.begin(), chain.begin() + static_cast<std::ptrdiff_t>(keep));
  if (chain.size() == 1 && !chain.front().value) data_.erase(it);
}

std::size_t MemoryStore::key_count() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return data_.size();
}

std::size_t MemoryStore::entry_count() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::size_t n = 0;
  for (const auto& [key, chain] : data_) n += chain.size();
  return n;
}

}  // namespace kvq::engine
