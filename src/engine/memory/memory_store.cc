#include "engine/memory/memory_store.h"

#include <algorithm>
#include <iterator>
#include <mutex>
#include <tuple>

#include "common/bytes.h"

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
                                  bool reverse) const override;

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

// One range read over the map (the store's shared lock held). It steps over keys without a value
// at the snapshot's version, jumping over the dead stretches the store knows (DeadRanges), and
// teaches the store the stretch it stepped over before the first value it found.
class MemoryStore::RangeScan {
 public:
  RangeScan(const MemoryStore& store, Version version, std::string_view begin, std::string_view end,
            std::size_t max, std::vector<KeyValue>* out)
      : store_(store), version_(version), begin_(begin), end_(end), max_(max), out_(out) {}

  void forward() {
    // The end is compared at each key, not found by a second descent: most reads stop at the
    // first key (a limit of 1 at a queue's front).
    const auto last = store_.data_.end();
    auto it = store_.data_.lower_bound(begin_);
    const auto before_end = [&](auto at) { return at != last && at->first.view() < end_; };
    while (before_end(it) && out_->size() < max_) {
      const Entry* e = visible(it->second, version_);
      if (e != nullptr && e->value) {
        stop_learning(begin_, it->first.view());
        out_->push_back({std::string(it->first.view()), *e->value});
        ++it;
        continue;
      }
      ++stepped_over_;
      if (!note_dead(it->second)) stop_learning(begin_, it->first.view());
      auto hit = try_skip(it->first.view());
      if (!hit) {
        ++it;
      } else if (std::string_view(hit->end) >= end_) {
        it = last;
      } else {
        it = store_.data_.lower_bound(hit->end);
      }
    }
    stop_learning(begin_, before_end(it) ? it->first.view() : end_);
  }

  void backward() {
    auto it = store_.data_.lower_bound(end_);  // one past the next key to look at
    const auto first = store_.data_.begin();
    const auto after_begin = [&](auto at) {
      return at != first && std::prev(at)->first.view() >= begin_;
    };
    while (after_begin(it) && out_->size() < max_) {
      auto cur = std::prev(it);
      const Entry* e = visible(cur->second, version_);
      if (e != nullptr && e->value) {
        stop_learning(common::key_after(cur->first.view()), end_);
        out_->push_back({std::string(cur->first.view()), *e->value});
        it = cur;
        continue;
      }
      ++stepped_over_;
      if (!note_dead(cur->second)) stop_learning(common::key_after(cur->first.view()), end_);
      auto hit = try_skip(cur->first.view());
      if (!hit) {
        it = cur;
      } else if (std::string_view(hit->begin) <= begin_) {
        it = first;
      } else {
        it = store_.data_.lower_bound(hit->begin);
      }
    }
    stop_learning(begin_, end_);  // (only if every key down to begin was dead)
  }

  // The keys without a value this scan stepped over (not those it jumped over).
  std::uint64_t stepped_over() const { return stepped_over_; }

 private:
  // A key without a value at the snapshot: whether it is dead from the snapshot on (its newest
  // entry is a tombstone at or below the snapshot's version). While learning, a dead key extends
  // the stretch.
  bool note_dead(const Chain& chain) {
    const Entry& newest = chain.entries.back();
    if (newest.value || newest.version > version_) return false;
    if (learning_) {
      since_ = std::max(since_, newest.version);
      ++stepped_;
    }
    return true;
  }

  // Consults the store's stretches at the first dead key and after each jump (not at every
  // step of a walk the stretches do not cover).
  std::optional<DeadRanges::Hit> try_skip(std::string_view key) {
    if (!consult_) return std::nullopt;
    auto hit = store_.dead_.skip(key, version_);
    consult_ = hit.has_value();
    if (hit && learning_) since_ = std::max(since_, hit->since);
    return hit;
  }

  // Ends learning: [from, to) holds no value at any version from since_ on. A stretch of fewer
  // than kLearnAfter dead keys is not worth its entry: stepping over them again costs less than
  // recording it (a queue's pop, at one client, steps over the tombstone of the pop before it).
  void stop_learning(std::string_view from, std::string_view to) {
    if (!learning_) return;
    learning_ = false;
    if (stepped_ >= kLearnAfter) store_.dead_.learn(std::string(from), std::string(to), since_);
  }

  static constexpr std::size_t kLearnAfter = 8;

  const MemoryStore& store_;
  const Version version_;
  const std::string_view begin_, end_;
  const std::size_t max_;
  std::vector<KeyValue>* out_;
  bool learning_ = true;
  bool consult_ = true;
  std::size_t stepped_ = 0;
  Version since_ = 0;
  std::uint64_t stepped_over_ = 0;
};

std::vector<KeyValue> MemoryStore::Snapshot::get_range(std::string_view begin, std::string_view end,
                                                       int limit, bool reverse) const {
  std::vector<KeyValue> out;
  if (!(begin < end)) return out;
  const std::size_t max = limit > 0 ? static_cast<std::size_t>(limit) : SIZE_MAX;
  std::shared_lock<std::shared_mutex> lock(store_->mu_);
  check_not_too_old();
  RangeScan scan(*store_, version_, begin, end, max, &out);
  reverse ? scan.backward() : scan.forward();
  if (scan.stepped_over() > 0) {
    store_->dead_keys_stepped_.fetch_add(scan.stepped_over(), std::memory_order_relaxed);
  }
  return out;
}

const MemoryStore::Entry* MemoryStore::visible(const Chain& chain, Version version) {
  for (auto it = chain.entries.rbegin(); it != chain.entries.rend(); ++it) {
    if (it->version <= version) return &*it;
  }
  return nullptr;
}

Version MemoryStore::latest_version() const { return latest_.load(std::memory_order_acquire); }

std::shared_ptr<const pipeline::StoreSnapshot> MemoryStore::snapshot() const {
  return std::make_shared<Snapshot>(this, latest_.load(std::memory_order_acquire));
}

void MemoryStore::append(Map::iterator key, Version version, std::optional<std::string> value) {
  std::vector<Entry>& chain = key->second.entries;
  if (!chain.empty() && chain.back().version == version) {
    // Rewritten within the batch. A tombstone must still be collected, even if the key was
    // created by this same batch (its chain was not queued then).
    chain.back().value = std::move(value);
    if (!chain.back().value) queue_superseded(key, version);
    return;
  }
  chain.push_back({version, std::move(value)});
  if (chain.size() > 1 || !chain.back().value) queue_superseded(key, version);
}

void MemoryStore::queue_superseded(Map::iterator key, Version version) {
  ++key->second.queued;
  superseded_.emplace_back(version, key);
}

void MemoryStore::apply(Version version, const std::vector<pipeline::StoreWrite>& writes) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (version <= latest_.load(std::memory_order_relaxed)) {
    throw Error(ErrorCode::kInternalError, "memory store: versions must increase");
  }
  for (const pipeline::StoreWrite& w : writes) {
    switch (w.kind) {
      case pipeline::StoreWrite::Kind::kSet: {
        auto it = data_.lower_bound(w.key);  // one descent, for a new key too
        if (it == data_.end() || it->first.view() != w.key) {
          it = data_.emplace_hint(it, std::piecewise_construct, std::forward_as_tuple(w.key),
                                  std::forward_as_tuple());
        }
        append(it, version, w.value);
        dead_.written(w.key);
        break;
      }
      case pipeline::StoreWrite::Kind::kClear: {
        auto it = data_.find(w.key);
        if (it != data_.end() && it->second.entries.back().value) {
          append(it, version, std::nullopt);
        }
        break;
      }
      case pipeline::StoreWrite::Kind::kClearRange: {
        if (!(w.key < w.value)) break;
        auto hi = data_.lower_bound(w.value);
        for (auto it = data_.lower_bound(w.key); it != hi; ++it) {
          if (it->second.entries.back().value) append(it, version, std::nullopt);
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
    const Map::iterator key = superseded_.front().second;
    superseded_.pop_front();
    compact(key);
  }
}

void MemoryStore::compact(Map::iterator key) {
  --key->second.queued;
  std::vector<Entry>& chain = key->second.entries;
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
  if (chain.size() == 1 && !chain.front().value && key->second.queued == 0) data_.erase(key);
}

std::size_t MemoryStore::key_count() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return data_.size();
}

std::size_t MemoryStore::entry_count() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  std::size_t n = 0;
  for (const auto& [key, chain] : data_) n += chain.entries.size();
  return n;
}

}  // namespace kvq::engine
