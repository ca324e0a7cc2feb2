// Internal (etcd engine): the parts of a commit's etcd Txn: the compares that detect conflicts
// (FoundationDB's rule on read-conflict ranges, mapped onto mod revisions), the write operations
// of the collapsed mutations, and how many of the server's --max-txn-ops they take.
//
// Example:
//   TxnBuilder b(codec);
//   auto compares = b.conflict_compares(read_version, merged_read_conflicts, seen);
//   WriteOps writes = b.write_ops(collapse(mutations, stamp));
#ifndef KVQ_SRC_ENGINE_ETCD_TXN_BUILDER_H_
#define KVQ_SRC_ENGINE_ETCD_TXN_BUILDER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/etcd/collapse.h"
#include "engine/etcd/key_codec.h"
#include "rpc.pb.h"

namespace kvq::engine::etcd {

// Every etcd record a session read: etcd key -> mod_revision as read.
using SeenRecords = std::map<std::string, std::int64_t>;

// The write operations of one commit.
struct WriteOps {
  std::vector<etcdserverpb::RequestOp> ops;
  bool has_put = false;  // some op is a put (else etcd would not advance its revision)
};

// How many of etcd's --max-txn-ops a commit Txn takes, by etcd's own rule (checkTxnRequest):
// the largest of its compares, success ops and failure ops; a nested Txn (the versionstamp
// sequencer's) gets what the outer Txn leaves. `writes` counts every write op including the
// sequencer put and the commit marker.
std::size_t txn_operations(std::size_t compares, std::size_t writes, bool stamped);

// Builds the compares and write ops of commits under one key prefix. Immutable; thread-safe.
class TxnBuilder {
 public:
  explicit TxnBuilder(const KeyCodec& codec) : codec_(codec) {}

  // Compares that all hold iff no record in a read-conflict range was modified (or created) after
  // `read_version` and none of the records `seen` in those ranges was deleted since.
  // `read_conflicts` merged (common::merge_ranges). None if read_version < 0.
  std::vector<etcdserverpb::Compare> conflict_compares(Version read_version,
                                                       const std::vector<KeyRange>& read_conflicts,
                                                       const SeenRecords& seen) const;
  // conflict_compares(...).size(), without building them.
  std::size_t count_conflict_compares(Version read_version,
                                      const std::vector<KeyRange>& read_conflicts,
                                      const SeenRecords& seen) const;

  // put / delete_range ops for the collapsed writes: no key twice, no put inside a deleted range;
  // delta records get fresh ids (one random prefix per call + a sequence number, so one commit's
  // deltas of a key sort in the order they apply). Plus, if `sequence` is given, the sequencer
  // put; plus the commit marker if there are ops but no put.
  WriteOps write_ops(const Collapsed& collapsed, std::optional<std::uint64_t> sequence) const;
  // write_ops(collapsed, sequence).ops.size(), without copying values.
  std::size_t count_write_ops(const Collapsed& collapsed, bool with_sequence) const;

 private:
  const KeyCodec& codec_;
};

}  // namespace kvq::engine::etcd

#endif  // KVQ_SRC_ENGINE_ETCD_TXN_BUILDER_H_
