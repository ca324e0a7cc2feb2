// Internal: the commit pipeline shared by the embedded engines, after FoundationDB's proxy +
// resolver + storage path, in one process and with no thread of its own:
//
//   Session::commit(request)
//     -> WriteGroup       group commit as LevelDB's DBImpl::Write / RocksDB's WriteThread: the
//                         committer that finds no batch in progress leads; it takes every commit
//                         queued so far as one batch and runs the phases below on its own thread;
//                         the others wait (spin, yield, then sleep) and get their result from it
//                         (write_group.h)
//     -> version          one commit version per batch: max(last + 1, base + microseconds since
//                         the pipeline started), base = the store's recovered version, so versions
//                         advance ~1,000,000 per second like FoundationDB's
//     -> collect          the MVCC floor rises; the checker and the store forget below it
//                         (read_versions.h)
//     -> BatchResolver    stamp: versionstamps (8-byte big-endian version + 2-byte big-endian
//                         position in the batch); check: ConflictChecker, too-old / conflict per
//                         transaction in batch order; resolve: atomic ADDs and versionstamps become
//                         plain StoreWrites (batch_resolver.h)
//     -> VersionedStore::apply(version, writes)   one atomic apply per batch (RocksDB: one WAL
//                         write + sync)
//     -> publish          the version becomes the newest read version
//     -> notify           watches on written keys are fired (watch_registry.h); the leader hands
//                         the leadership to the oldest waiting commit, then releases its followers
//
// Read versions: a session reads the store snapshot at the latest applied version and holds a pin
// on it. The MVCC floor is max(oldest pinned read version, newest version superseded more than
// mvcc_window ago); reads and commits below it get transaction_too_old, and the conflict history
// and the store (forget_before) are collected below it, so memory stays bounded under churn.
//
// Plugging a store in (the RocksDB engine does this):
//   std::shared_ptr<engine::Engine> e =
//       pipeline::make_pipeline_engine(std::make_unique<MyStore>(...),
//       pipeline::PipelineOptions{});
//   auto db = std::make_shared<kvq::Database>(e, url);
//
// Thread safety: the engine is thread-safe; each Session is used by one thread at a time.
#ifndef KVQ_SRC_TXN_COMMIT_PIPELINE_H_
#define KVQ_SRC_TXN_COMMIT_PIPELINE_H_

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine/pipeline/versioned_store.h"

namespace kvq::pipeline {

// Options of the pipeline (and so of the engines built on it).
struct PipelineOptions {
  // How long a read version stays usable after a newer version superseded it; older read
  // versions get transaction_too_old. Must be in [1, 2147483647] ms. Default: 5 s (FDB's).
  std::chrono::milliseconds mvcc_window{5000};
  // Most transactions one commit batch takes (versionstamps number them in 2 bytes). Must be in
  // [1, 65535]. Default: 1024.
  std::size_t max_batch_transactions = 1024;
};

// Reads the pipeline options from URL query parameters: "mvcc_window_ms" (integer in
// [1, 2147483647]). Other keys are left alone; returns the keys it consumed removed from `query`.
// Throws connection_string_invalid for a malformed value.
PipelineOptions pipeline_options_from_query(std::map<std::string, std::string>& query);

// Builds an Engine that runs every commit through the shared pipeline into `store`. The store must
// be empty or recovered (its latest_version() is the starting version). Throws
// invalid_option_value for bad options. The engine owns the store.
std::shared_ptr<engine::Engine> make_pipeline_engine(std::unique_ptr<VersionedStore> store,
                                                     PipelineOptions options = {});

}  // namespace kvq::pipeline

#endif  // KVQ_SRC_TXN_COMMIT_PIPELINE_H_
