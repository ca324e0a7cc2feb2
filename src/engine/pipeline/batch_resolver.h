// Internal: the resolve phases of a commit batch, between the write group and the store:
//   stamp      each transaction gets its versionstamp (8-byte big-endian commit version + 2-byte
//              big-endian position in the batch); versionstamped keys become write conflicts
//   check      the ConflictChecker decides too-old / conflict / committed, in batch order
//   resolve    the committed mutations become plain StoreWrites: atomic ADDs read the state left
//              by earlier writes of the batch (or the store), versionstamps are spliced in
// Failed transactions get their error; committed ones their version and versionstamp.
//
// Example:
//   BatchResolver resolver(store, checker);
//   ResolvedBatch out = resolver.run(batch, version);
//   if (out.any_committed) store->apply(version, out.writes);
//
// Thread safety: used by the leader of the write group only.
#ifndef KVQ_SRC_ENGINE_PIPELINE_BATCH_RESOLVER_H_
#define KVQ_SRC_ENGINE_PIPELINE_BATCH_RESOLVER_H_

#include <string>
#include <vector>

#include "engine/pipeline/conflict_checker.h"
#include "engine/pipeline/versioned_store.h"
#include "engine/pipeline/write_group.h"

namespace kvq::pipeline {

// The plain writes of a batch's committed transactions, in commit order.
struct ResolvedBatch {
  std::vector<StoreWrite> writes;
  bool any_committed = false;
};

class BatchResolver {
 public:
  BatchResolver(const VersionedStore* store, ConflictChecker* checker)
      : store_(store), checker_(checker) {}

  // Decides every writer of `batch` at `version` and resolves the committed ones' mutations
  // (moving them out of the requests). Throws kvq::Error if a store read (for an ADD) fails; then
  // nothing of the batch is committed, though the checker recorded its writes (that only makes
  // later checks more conservative).
  ResolvedBatch run(std::vector<Writer*>& batch, Version version);

  // The 10-byte versionstamp of position `order` in the batch committed at `version`.
  static std::string versionstamp(Version version, std::size_t order);

 private:
  // Phase "stamp": the checker's input; writers with a malformed versionstamp get their error.
  std::vector<CheckerTransaction> stamp(std::vector<Writer*>& batch,
                                        const std::vector<std::string>& stamps);
  // Sets the error of a writer the checker rejected; returns whether it committed.
  static bool accept(Writer& w, ConflictChecker::Outcome outcome);

  const VersionedStore* store_;
  ConflictChecker* checker_;
};

}  // namespace kvq::pipeline

#endif  // KVQ_SRC_ENGINE_PIPELINE_BATCH_RESOLVER_H_
