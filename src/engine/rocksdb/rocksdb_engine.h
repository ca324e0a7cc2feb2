// Internal: the "rocksdb:/path" engine = the shared commit pipeline
// (src/engine/pipeline/commit_pipeline.h) over a RocksDbStore (src/engine/rocksdb/rocksdb_store.h).
// See docs/engines.md.
#ifndef KVQ_SRC_ENGINE_ROCKSDB_ROCKSDB_ENGINE_H_
#define KVQ_SRC_ENGINE_ROCKSDB_ROCKSDB_ENGINE_H_

#include <map>
#include <memory>
#include <string>

#include "engine/engine.h"

namespace kvq::engine {

// Opens the durable engine on directory `path` (created if missing; relative paths are relative
// to the working directory) with the URL query parameters `query`:
//   sync=true|false      fsync the WAL before a commit returns (default true; see
//                        RocksDbStoreOptions::sync)
//   mvcc_window_ms=N     the pipeline's MVCC window (default 5000)
// Recovers the latest committed version; new commit versions (and versionstamps) are above it.
// Throws connection_string_invalid for an empty path or a bad/unknown parameter (nothing is
// created then), database_in_use if another process (or open database in this process) holds
// the directory, io_error / corruption from RocksDB. Thread-safe.
std::shared_ptr<Engine> open_rocksdb(const std::string& path,
                                     const std::map<std::string, std::string>& query);

}  // namespace kvq::engine

#endif  // KVQ_SRC_ENGINE_ROCKSDB_ROCKSDB_ENGINE_H_
