// Internal (etcd engine): one commit = one etcd Txn (docs/engines.md, etcd, has the long form).
//
// The Txn's compares fail iff a read-conflict range was written after the read version
// (txn_builder.h); its success ops are the collapsed mutations (collapse.h); its failure op is a
// Range at the read version, so that a failed commit whose read version was compacted reports
// transaction_too_old. A commit with versionstamped mutations reads a sequencer key first and
// nests its writes in an inner Txn pinning the sequencer; if only the sequencer moved, the inner
// Txn fails, returns the sequencer's new value, and the commit is retried internally. The stamped
// commits of one process take turns (Cluster::stamp_turns), each starting from the sequencer as
// the one before left it, so they neither race nor read it again. Before
// sending, the Txn is checked against --max-txn-ops (max_txn_ops=) and --max-request-bytes
// (max_request_bytes=).
//
// Example:
//   CommitResult r = Committer(*cluster, seen).commit(std::move(request));
#ifndef KVQ_SRC_ENGINE_ETCD_COMMITTER_H_
#define KVQ_SRC_ENGINE_ETCD_COMMITTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/etcd/cluster.h"
#include "engine/etcd/collapse.h"
#include "engine/etcd/responses.h"
#include "engine/etcd/txn_builder.h"

namespace kvq::engine::etcd {

// Commits one session's transaction. Used once, by one thread.
class Committer {
 public:
  // `seen`: every record the session read (for the deletion pins).
  Committer(Cluster& cluster, const SeenRecords& seen) : cluster_(cluster), seen_(seen) {}

  // Commits `request`. Throws not_committed (conflict), commit_unknown_result, transaction_too_old,
  // transaction_too_large (over max_txn_ops / max_request_bytes; nothing sent), and the errors of
  // throw_rpc_error.
  CommitResult commit(CommitRequest request);

 private:
  void check_operations(std::size_t writes) const;
  void check_bytes(const etcdserverpb::TxnRequest& txn) const;
  // Sends the commit Txn of `request` (`unstamped`: its mutations collapsed, for an unstamped
  // commit), again with the sequencer's new value each time only the sequencer moved.
  CommitResult send(const CommitRequest& request, const Collapsed& unstamped);
  Sequencer read_sequencer() const;
  std::uint64_t next_sequence() const;
  etcdserverpb::TxnRequest build(Version read_version, WriteOps writes) const;
  CommitResult finish(std::int64_t revision, const Collapsed& done, const std::string& stamp);

  Cluster& cluster_;
  const SeenRecords& seen_;
  std::vector<etcdserverpb::Compare> compares_;
  bool stamped_ = false;
  Sequencer sequencer_;  // as last read (or left by this process's last stamped commit)
};

}  // namespace kvq::engine::etcd

#endif  // KVQ_SRC_ENGINE_ETCD_COMMITTER_H_
