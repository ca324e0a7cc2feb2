// Internal: the in-memory MVCC VersionedStore of the "memory:" engine. An ordered map from key
// (kept in its map node: stored_key.h) to its version chain (oldest first; a chain entry without
// value is a tombstone). Garbage collection below forget_before()'s floor keeps, per key,
// only the newest entry at or below the floor (and drops keys whose surviving entry is a
// tombstone), incrementally: each apply() queues the keys it superseded, forget_before() compacts
// those whose superseding version fell below the floor. Memory therefore tracks the live data plus
// the versions newer than the floor. Tombstones newer than the floor (a queue's popped front while
// an old reader holds the floor down) are not walked over again and again: range reads learn and
// skip dead stretches (dead_ranges.h).
//
// Thread safety: as VersionedStore: apply()/forget_before() from one thread at a time, snapshot()
// and snapshot reads from any thread. Snapshots must not outlive the store. A snapshot whose
// version fell below the floor throws transaction_too_old on read.
#ifndef KVQ_SRC_ENGINE_MEMORY_MEMORY_STORE_H_
#define KVQ_SRC_ENGINE_MEMORY_MEMORY_STORE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/memory/dead_ranges.h"
#include "engine/memory/stored_key.h"
#include "engine/pipeline/versioned_store.h"

namespace kvq::engine {

class MemoryStore final : public pipeline::VersionedStore {
 public:
  MemoryStore() = default;
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  Version latest_version() const override;
  std::shared_ptr<const pipeline::StoreSnapshot> snapshot() const override;
  void apply(Version version, const std::vector<pipeline::StoreWrite>& writes) override;
  void forget_before(Version version) override;

  // For tests: the number of keys held (live or with pending versions) and of chain entries.
  std::size_t key_count() const;
  std::size_t entry_count() const;
  // For tests: how many keys without a value range reads have stepped over, in all (the cost the
  // dead stretches bound).
  std::uint64_t dead_keys_stepped() const { return dead_keys_stepped_.load(); }

 private:
  class Snapshot;
  class RangeScan;
  struct Entry {
    Version version;
    std::optional<std::string> value;  // nullopt: tombstone
  };
  // A key's version chain, oldest first, and how many superseded_ records name the key (it is
  // erased only when none does, so that the records can hold its map position).
  struct Chain {
    std::vector<Entry> entries;
    std::uint32_t queued = 0;
  };
  using Map = std::map<StoredKey, Chain, StoredKey::Less>;

  // The entry of `chain` visible at `version`, or null.
  static const Entry* visible(const Chain& chain, Version version);
  void append(Map::iterator key, Version version, std::optional<std::string> value);
  // Queues `key` for compaction once `version` falls below the floor.
  void queue_superseded(Map::iterator key, Version version);
  void compact(Map::iterator key);

  mutable std::shared_mutex mu_;
  // Stretches with no value from some version on, so range reads skip the tombstones of pops.
  mutable DeadRanges dead_;
  mutable std::atomic<std::uint64_t> dead_keys_stepped_{0};
  Map data_;
  std::atomic<Version> latest_{0};
  Version floor_ = 0;  // guarded by mu_
  // Keys with superseded entries, by superseding version (writer thread only, under mu_).
  std::deque<std::pair<Version, Map::iterator>> superseded_;
};

}  // namespace kvq::engine

#endif  // KVQ_SRC_ENGINE_MEMORY_MEMORY_STORE_H_
