// Internal: the storage underneath the shared commit pipeline
// (src/engine/pipeline/commit_pipeline.h). The memory engine and the RocksDB engine are each a
// VersionedStore plugged into the same pipeline and conflict checker; only the store differs.
#ifndef KVQ_SRC_TXN_VERSIONED_STORE_H_
#define KVQ_SRC_TXN_VERSIONED_STORE_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/database.h"

namespace kvq::pipeline {

// A read-only view of the store at one version. Thread-safe. Holding one pins its version's data
// (the memory store keeps it; RocksDB keeps its snapshot) until released, so release promptly.
class StoreSnapshot {
 public:
  virtual ~StoreSnapshot() = default;
  virtual Version version() const = 0;
  virtual std::optional<std::string> get(std::string_view key) const = 0;
  // Pairs in [begin, end), ascending (descending if reverse), at most limit (0 = all).
  virtual std::vector<KeyValue> get_range(std::string_view begin, std::string_view end, int limit,
                                          bool reverse) const = 0;
};

// A plain write, after the pipeline resolved atomic ops and versionstamps.
struct StoreWrite {
  enum class Kind { kSet, kClear, kClearRange } kind;
  std::string key;    // the key; the range begin for kClearRange
  std::string value;  // the value for kSet; the range end for kClearRange
};

// The versioned key-value store. The pipeline calls apply() from one thread at a time, with
// strictly increasing versions; snapshot() may be called concurrently from any thread.
class VersionedStore {
 public:
  virtual ~VersionedStore() = default;
  // The last version applied (after reopening a durable store: the last version recovered; 0 for
  // a new store).
  virtual Version latest_version() const = 0;
  // A snapshot at latest_version().
  virtual std::shared_ptr<const StoreSnapshot> snapshot() const = 0;
  // Applies `writes`, in order, atomically, at `version` (> latest_version()); `writes` may be
  // empty (a batch whose transactions only added write-conflict ranges). When it returns the
  // batch is as durable as the store promises (RocksDB: WAL synced unless sync is off). Throws
  // kvq::Error (io_error, database_full) with nothing applied.
  virtual void apply(Version version, const std::vector<StoreWrite>& writes) = 0;
  // Versions older than `version` will never be read again; the store may reclaim them.
  virtual void forget_before(Version version) = 0;
};

}  // namespace kvq::pipeline

#endif  // KVQ_SRC_TXN_VERSIONED_STORE_H_
