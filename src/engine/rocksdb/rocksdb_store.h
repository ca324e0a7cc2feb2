// Internal: the durable VersionedStore of the "rocksdb:/path" engine. The shared commit pipeline
// (src/engine/pipeline/commit_pipeline.h) and conflict checker run on top of it exactly as on the
// memory store; this class only stores versioned data durably.
//
// On-disk layout (one RocksDB database in one directory):
//  - column family "default": the data keys, byte for byte as the transactions wrote them
//  (RocksDB's
//    bytewise comparator gives FoundationDB's key order).
//  - column family "kvq_meta": kvq's bookkeeping, never visible to transactions:
//      "format"  = "kvq-rocksdb-1"       written when the database is created
//      "version" = 8-byte big-endian latest applied Version
//    "version" is written in the SAME WriteBatch as every applied batch, so after a crash RocksDB's
//    WAL recovery gives data and version of the same last durable batch (point-in-time recovery).
//
// MVCC: every snapshot() is a RocksDB snapshot (released as soon as the last reference to the
// StoreSnapshot goes away, or when forget_before() passes its version) paired with the version it
// shows, read from the "version" key through that very snapshot, so a snapshot's data and version
// always agree. Old versions are kept by RocksDB exactly as long as a snapshot needs them.
//
// Range reads seek past stretches of deleted keys they learnt about from earlier reads
// (skip_hints.h), so popping from the head of a queue does not step over the tombstones of every
// earlier pop.
//
// Example:
//   RocksDbStore store = *RocksDbStore::open("/tmp/db", {.sync = true});
//   store.apply(store.latest_version() + 1, {{StoreWrite::Kind::kSet, "k", "v"}});
//   auto snap = store.snapshot();  // snap->get("k") == "v"
#ifndef KVQ_SRC_ENGINE_ROCKSDB_ROCKSDB_STORE_H_
#define KVQ_SRC_ENGINE_ROCKSDB_ROCKSDB_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "engine/pipeline/versioned_store.h"

namespace rocksdb {
class Status;
class WriteBatch;
}  // namespace rocksdb

namespace kvq::engine::rocksdb_engine {

// Options of a RocksDbStore (URL query parameters of "rocksdb:/path?...", see docs/engines.md).
struct RocksDbStoreOptions {
  // Sync the write-ahead log (fsync) before apply() returns, so an acknowledged commit survives a
  // power failure. With false, apply() returns once the batch is written to the WAL file (in the
  // OS page cache): commits survive a crash of the process (e.g. SIGKILL) but the last ones may be
  // lost in a power failure or OS crash. Default: true.
  bool sync = true;
  // Create the directory and database if missing. Default: true.
  bool create_if_missing = true;
};

class DbHandle;       // Owns the rocksdb::DB; shared by the store and its snapshots.
class SkipHints;      // Lets range reads seek past deleted keys (skip_hints.h).
class OpenSnapshots;  // The snapshots handed out, by version (open_snapshots.h).

class RocksDbStore : public pipeline::VersionedStore {
 public:
  // Opens (creating it if missing and allowed) the database in directory `path` and recovers the
  // latest applied version. Throws kvq::Error:
  //   database_in_use  another process (or another open store in this process) holds the database
  //                    (RocksDB's LOCK file); the message names the path.
  //   io_error         the directory cannot be created/read/written, or does not exist and
  //                    create_if_missing is false.
  //   corruption       RocksDB reports corruption, or the directory is a RocksDB database that kvq
  //                    did not create.
  //   invalid_argument `path` is empty.
  static std::unique_ptr<RocksDbStore> open(const std::string& path,
                                            const RocksDbStoreOptions& options = {});

  // Closes the database once the last snapshot handed out is released (snapshots keep it open).
  ~RocksDbStore() override;
  RocksDbStore(const RocksDbStore&) = delete;
  RocksDbStore& operator=(const RocksDbStore&) = delete;

  // The last version applied (after open: the version recovered; 0 for a new database).
  // Thread-safe.
  Version latest_version() const override;

  // A snapshot of the latest applied batch. Its version() is the version of exactly the data it
  // shows (while an apply() is returning it may be one ahead of latest_version()). Reads
  // through it are thread-safe; they throw kvq::Error (io_error, corruption) if RocksDB fails.
  // The RocksDB snapshot is released when the last shared_ptr copy is destroyed, or earlier by
  // forget_before. Thread-safe.
  std::shared_ptr<const pipeline::StoreSnapshot> snapshot() const override;

  // Applies `writes` in order as ONE RocksDB WriteBatch together with the new "version" key, with
  // WriteOptions::sync = options.sync: when it returns the batch is durable (see
  // RocksDbStoreOptions::sync). Throws invalid_argument if version <= latest_version(); io_error,
  // database_full (no space) or corruption from RocksDB, with nothing applied. Must not be called
  // concurrently with itself (the pipeline calls it from one thread at a time).
  void apply(Version version, const std::vector<pipeline::StoreWrite>& writes) override;

  // Releases the RocksDB snapshots of versions below `version` that transactions still hold
  // (reads through them throw transaction_too_old, as the pipeline's check already does), so that
  // RocksDB can drop what only they kept; one a read is using now is left for a later call (this
  // runs on the commit path: it never waits for a read). Thread-safe.
  void forget_before(Version version) override;

  // The directory this store was opened on.
  const std::string& path() const { return path_; }
  // For tests: how many RocksDB snapshots are held now (RocksDB's own count).
  std::uint64_t held_snapshots() const;
  // The options this store was opened with.
  const RocksDbStoreOptions& options() const { return options_; }

 private:
  RocksDbStore(std::string path, RocksDbStoreOptions options, std::shared_ptr<DbHandle> db,
               Version recovered);
  // Adds the clear of [begin, end) to `batch`: point deletes of the keys it removes (live ones and
  // `batch_puts`, keys set earlier in the batch) when few, else one DeleteRange.
  ::rocksdb::Status add_clear_range(::rocksdb::WriteBatch& batch, std::string_view begin,
                                    std::string_view end,
                                    const std::set<std::string_view>& batch_puts);

  const std::string path_;
  const RocksDbStoreOptions options_;
  std::shared_ptr<DbHandle> db_;
  std::atomic<Version> latest_version_;
  // (RocksDB sequence number, version) of the last apply(), so snapshot() can usually skip reading
  // the "version" key. Guarded by cache_mutex_.
  mutable std::mutex cache_mutex_;
  std::uint64_t cached_sequence_ = 0;
  Version cached_version_ = 0;
  std::shared_ptr<SkipHints> hints_;
  std::shared_ptr<OpenSnapshots> open_snapshots_;
};

}  // namespace kvq::engine::rocksdb_engine

#endif  // KVQ_SRC_ENGINE_ROCKSDB_ROCKSDB_STORE_H_
