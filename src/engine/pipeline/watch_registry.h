// Internal: the watches of the commit pipeline. A watch is registered with the value its
// transaction saw; it fires once a commit makes the key's value differ (or at once if it already
// differs), and fails when the engine closes.
//
// Ordering: every write of the watch count is a read-modify-write, as is after_apply()'s read of
// it, so registration and a commit are totally ordered: either the commit comes later and sees a
// count > 0 (and checks the new entry under the mutex), or the registration comes later and its
// snapshot includes the commit's writes. (RMWs rather than fences: ThreadSanitizer does not model
// fences.)
//
// Thread safety: all methods from any thread.
#ifndef KVQ_SRC_ENGINE_PIPELINE_WATCH_REGISTRY_H_
#define KVQ_SRC_ENGINE_PIPELINE_WATCH_REGISTRY_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/pipeline/versioned_store.h"
#include "engine/watch_state.h"

namespace kvq::pipeline {

class WatchRegistry {
 public:
  explicit WatchRegistry(const VersionedStore* store) : store_(store) {}
  // Fails every pending watch with operation_cancelled.
  ~WatchRegistry();

  // Arms `state` on `key`; fires it at once if the store's latest value is not `value_seen`.
  void add(std::string key, std::optional<std::string> value_seen,
           std::shared_ptr<detail::WatchState> state);
  // After a batch of `writes` was applied: fires the watches whose value changed.
  void after_apply(const std::vector<StoreWrite>& writes);

 private:
  struct Entry {
    std::optional<std::string> value_seen;
    std::shared_ptr<detail::WatchState> state;
  };
  using Map = std::multimap<std::string, Entry, std::less<>>;

  // Fires or fails the entry at `it` if it is settled against `snap`; returns the next entry.
  Map::iterator check(Map::iterator it, const StoreSnapshot& snap);
  void prune();
  void publish_count() { count_.exchange(watches_.size(), std::memory_order_acq_rel); }

  const VersionedStore* store_;
  std::mutex mu_;
  Map watches_;
  std::atomic<std::size_t> count_{0};
  std::uint64_t registrations_ = 0;
};

}  // namespace kvq::pipeline

#endif  // KVQ_SRC_ENGINE_PIPELINE_WATCH_REGISTRY_H_
