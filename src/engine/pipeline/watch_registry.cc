#include "engine/pipeline/watch_registry.h"

#include <iterator>
#include <utility>

namespace kvq::pipeline {

WatchRegistry::~WatchRegistry() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, entry] : watches_) {
    entry.state->fail(Error(ErrorCode::kOperationCancelled, "the database was closed"));
  }
}

void WatchRegistry::add(std::string key, std::optional<std::string> value_seen,
                        std::shared_ptr<detail::WatchState> state) {
  std::lock_guard<std::mutex> lock(mu_);
  if (++registrations_ % 256 == 0) prune();
  // Register first, then compare with the latest value (see the file comment): comparing first
  // missed a commit applied in between while no other watch was registered.
  auto it = watches_.emplace(std::move(key), Entry{std::move(value_seen), state});
  publish_count();
  std::optional<std::string> current;
  try {
    current = store_->snapshot()->get(it->first);
  } catch (const Error& e) {
    state->fail(e);
  }
  if (!state->ready() && current != it->second.value_seen) state->fire();
  if (state->ready()) {
    watches_.erase(it);
    publish_count();
  }
}

WatchRegistry::Map::iterator WatchRegistry::check(Map::iterator it, const StoreSnapshot& snap) {
  if (it->second.state->ready()) return watches_.erase(it);
  std::optional<std::string> current;
  try {
    current = snap.get(it->first);
  } catch (const Error& e) {
    it->second.state->fail(e);
    return watches_.erase(it);
  }
  if (current != it->second.value_seen) {
    it->second.state->fire();
    return watches_.erase(it);
  }
  return std::next(it);
}

void WatchRegistry::after_apply(const std::vector<StoreWrite>& writes) {
  // An RMW, not a load: pairs with the RMWs of add() (see the file comment).
  if (count_.fetch_add(0, std::memory_order_acq_rel) == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (watches_.empty()) return;
  std::shared_ptr<const StoreSnapshot> snap = store_->snapshot();
  for (const StoreWrite& w : writes) {
    if (w.kind == StoreWrite::Kind::kClearRange) {
      for (auto it = watches_.lower_bound(w.key); it != watches_.end() && it->first < w.value;) {
        it = check(it, *snap);
      }
    } else {
      auto [lo, hi] = watches_.equal_range(w.key);
      for (auto it = lo; it != hi;) it = check(it, *snap);
    }
  }
  publish_count();
}

void WatchRegistry::prune() {
  for (auto it = watches_.begin(); it != watches_.end();) {
    it = it->second.state->ready() ? watches_.erase(it) : std::next(it);
  }
}

}  // namespace kvq::pipeline
