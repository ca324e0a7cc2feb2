#include "engine/etcd/committer.h"

#include "common/bytes.h"
#include "engine/etcd/delta_folder.h"
#include "kvq/error.h"

namespace kvq::engine::etcd {

namespace pb = ::etcdserverpb;

CommitResult Committer::commit(CommitRequest request) {
  const TxnBuilder builder(cluster_.codec());
  compares_ = builder.conflict_compares(
      request.read_version, common::merge_ranges(std::move(request.read_conflicts)), seen_);
  const Collapsed unstamped = collapse(request.mutations, "");
  stamped_ = unstamped.needs_stamp;
  if (!stamped_) return send(request, unstamped);
  StampTurns& turns = cluster_.stamp_turns();
  std::unique_lock turn(turns.mu, std::defer_lock);
  if (!turn.try_lock_for(cluster_.options().rpc_timeout)) {
    // The turn is held past an RPC's timeout (a commit stuck on a failing member): go without
    // it, racing as the commits of other processes do, rather than queue behind it.
    sequencer_ = read_sequencer();
    return send(request, unstamped);
  }
  sequencer_ = turns.known ? *turns.known : read_sequencer();
  turns.known.reset();  // until this commit's outcome says what the sequencer holds
  try {
    CommitResult result = send(request, unstamped);
    // The sequencer now holds this commit's sequence, written at its revision.
    turns.known =
        Sequencer{result.versionstamp.substr(0, kSequenceSize), result.version, result.version};
    return result;
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kNotCommitted) turns.known = sequencer_;  // as last read
    throw;
  }
}

CommitResult Committer::send(const CommitRequest& request, const Collapsed& unstamped) {
  const TxnBuilder builder(cluster_.codec());
  for (int attempt = 0;; ++attempt) {
    const std::uint64_t sequence = stamped_ ? next_sequence() : 0;
    const std::string stamp =
        stamped_ ? common::encode_be64(sequence) + std::string(2, '\0') : std::string();
    const Collapsed done = stamped_ ? collapse(request.mutations, stamp) : unstamped;
    WriteOps writes = builder.write_ops(done, stamped_ ? std::optional(sequence) : std::nullopt);
    check_operations(writes.ops.size());
    const pb::TxnRequest txn = build(request.read_version, std::move(writes));
    check_bytes(txn);
    const CommitAnswer answer = decode_commit_response(cluster_.commit_rpc(txn), stamped_);
    if (answer.kind == CommitAnswer::kConflict) {
      throw Error(ErrorCode::kNotCommitted,
                  "etcd: a key this transaction read was written after its read version");
    }
    if (answer.kind == CommitAnswer::kSequencerMoved) {
      // Only the sequencer moved (a stamped commit of another engine: another process, or
      // another kvq::open of this one): nothing was applied; retry with its new value.
      if (attempt >= 1000) {
        throw Error(ErrorCode::kNotCommitted, "etcd: versionstamp sequencer kept moving");
      }
      sequencer_ = *answer.sequencer;
      continue;
    }
    return finish(answer.revision, done, stamp);
  }
}

void Committer::check_operations(std::size_t writes) const {
  const std::size_t max = static_cast<std::size_t>(cluster_.options().max_txn_ops);
  const std::size_t needed = txn_operations(compares_.size(), writes, stamped_);
  if (needed <= max) return;
  throw Error(ErrorCode::kTransactionTooLarge,
              "etcd: the commit needs " + std::to_string(needed) + " operations by etcd's count (" +
                  std::to_string(compares_.size()) +
                  " compares: one per read-conflict range and per record read in one, none for "
                  "snapshot reads; " +
                  std::to_string(writes) +
                  " writes: one per key, clear ranges split around later sets), over the "
                  "cluster's --max-txn-ops as given by the URL option max_txn_ops=" +
                  std::to_string(max) + "; nothing was sent");
}

void Committer::check_bytes(const pb::TxnRequest& txn) const {
  const std::size_t max = cluster_.options().max_request_bytes;
  const std::size_t bytes = txn.ByteSizeLong() + kRaftRequestFraming;
  if (bytes <= max) return;
  throw Error(ErrorCode::kTransactionTooLarge,
              "etcd: the commit request would take " + std::to_string(bytes) +
                  " bytes (with etcd's framing), over the cluster's --max-request-bytes as "
                  "given by the URL option max_request_bytes=" +
                  std::to_string(max) + "; nothing was sent");
}

Sequencer Committer::read_sequencer() const {
  pb::RangeRequest rr;
  rr.set_key(cluster_.codec().sequencer_key());
  return decode_sequencer(cluster_.range(rr, "versionstamp"));
}

std::uint64_t Committer::next_sequence() const {
  const std::uint64_t previous = sequencer_.value ? common::decode_be64(*sequencer_.value) : 0;
  return std::max<std::uint64_t>(previous + 1, static_cast<std::uint64_t>(sequencer_.floor) + 1);
}

pb::TxnRequest Committer::build(Version read_version, WriteOps writes) const {
  pb::TxnRequest txn;
  for (const pb::Compare& c : compares_) *txn.add_compare() = c;
  if (!compares_.empty()) {
    // If the compares fail and the read version was compacted meanwhile, etcd answers this
    // Range with "required revision has been compacted": transaction_too_old, as FDB.
    pb::RangeRequest* probe = txn.add_failure()->mutable_request_range();
    probe->set_key(cluster_.codec().sequencer_key());
    probe->set_revision(read_version);
    probe->set_count_only(true);
  }
  pb::TxnRequest* target = &txn;
  if (stamped_) {
    // Nested: if only the sequencer moved, the inner Txn fails and returns its new value.
    target = txn.add_success()->mutable_request_txn();
    pb::Compare* c = target->add_compare();
    c->set_key(cluster_.codec().sequencer_key());
    c->set_target(pb::Compare::MOD);
    c->set_result(pb::Compare::EQUAL);
    c->set_mod_revision(sequencer_.mod);
    target->add_failure()->mutable_request_range()->set_key(cluster_.codec().sequencer_key());
  }
  for (pb::RequestOp& op : writes.ops) *target->add_success() = std::move(op);
  return txn;
}

CommitResult Committer::finish(std::int64_t revision, const Collapsed& done,
                               const std::string& stamp) {
  cluster_.count_batch();
  cluster_.saw(revision);
  // Keep delta records few: now and then fold a key this commit added to.
  for (const auto& [key, runs] : done.deltas) {
    if (DeltaFolder::fold_dice()) DeltaFolder(cluster_).fold(key, DeltaFolder::kFoldOnCommit);
  }
  CommitResult result;
  result.version = revision;
  result.versionstamp = stamped_ ? stamp
                                 : common::encode_be64(static_cast<std::uint64_t>(result.version)) +
                                       std::string(2, '\0');
  return result;
}

}  // namespace kvq::engine::etcd
