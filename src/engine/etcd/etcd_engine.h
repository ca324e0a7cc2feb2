// Internal: the distributed engine, speaking etcd v3's gRPC API ("etcd://host:port[,host:port...]").
//
// Mapping of FoundationDB's model onto etcd (docs/engines.md has the long form):
//  - Read version = an etcd revision, taken by the transaction's first read; every later read is a
//    Range at that revision.
//  - Commit = one etcd Txn. Its compares fail iff something the transaction read (its read-conflict
//    ranges) was written after the read version: `mod_revision < read_version + 1` over every
//    read-conflict range catches inserts and updates; `mod_revision == seen` on every key the
//    transaction saw inside a read-conflict range catches deletions. The buffered mutations are
//    collapsed per key (etcd refuses the same key twice in one Txn) into put/delete_range ops.
//  - Atomic add on a value the transaction does not know is a blind "delta record" next to the
//    key (reads sum base + newer deltas; deltas are folded now and then), so adds never read,
//    never conflict and never contend. Versionstamps come from a sequencer key pinned in a nested
//    Txn; if only the sequencer moved, the engine retries internally.
//  - kvq key k lives at prefix + escaped(k) (default prefix "kvq/", URL option prefix=), so the
//    empty key is legal, a key's base and deltas are one etcd range, and kvq data is kept apart
//    from anything else in the cluster.
//
// Thread safety: EtcdEngine is thread-safe; a session is used by one thread at a time.
#ifndef KVQ_SRC_ENGINE_ETCD_ETCD_ENGINE_H_
#define KVQ_SRC_ENGINE_ETCD_ETCD_ENGINE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"

namespace kvq::engine::etcd {

// Options of the etcd engine; parsed from the URL query string (see parse_etcd_url).
struct EtcdOptions {
  // "host:port" of each cluster member to talk to; at least one.
  std::vector<std::string> endpoints;
  // Prefix of every etcd key kvq writes (URL option prefix=). Must not be empty. Default "kvq/".
  std::string prefix = "kvq/";
  // Deadline of one RPC attempt (URL option timeout_ms=). Default 2000 ms.
  std::chrono::milliseconds rpc_timeout{2000};
  // How long reads keep failing over between endpoints before connection_failed (URL option
  // failover_ms=). Default 10000 ms.
  std::chrono::milliseconds failover_budget{10000};
  // The cluster's --max-txn-ops (URL option max_txn_ops=): a commit that needs more compares or
  // operations than this fails with transaction_too_large. Default 128 (etcd's default).
  int max_txn_ops = 128;
  // If > 0 (URL option mvcc_window_ms=), the engine compacts the cluster's history older than
  // this, so reads at older revisions get transaction_too_old, as FoundationDB's MVCC window.
  // Compaction is cluster-wide. Default 0: kvq never compacts (use etcd's
  // --auto-compaction-retention).
  std::chrono::milliseconds mvcc_window{0};
  // URL option fast_first_read=1: a transaction's first read (which fixes its read version) is a
  // serializable Range answered by the member itself instead of a linearizable one, unless that
  // member is behind the newest revision this process has seen. Saves a Raft ReadIndex round
  // per transaction; read-write transactions stay serializable (their commit compares catch any
  // staleness), but a read-only transaction talking to a lagging follower may miss a commit made
  // by another process just before it began. Default 0 (off).
  bool fast_first_read = false;
};

// Parses "etcd://host:port[,host:port...][?prefix=P&timeout_ms=N&failover_ms=N&max_txn_ops=N
// &mvcc_window_ms=N]".
// Throws connection_string_invalid for anything malformed (no endpoint, bad port, unknown option).
EtcdOptions parse_etcd_url(std::string_view url);

// What one member says about itself (Maintenance.Status).
struct MemberStatus {
  std::uint64_t member_id = 0;
  std::uint64_t leader_id = 0;  // 0 if the member knows no leader
  std::int64_t revision = 0;
};

// Asks the member at `endpoint` ("host:port") for its status; nullopt if it does not answer within
// `timeout`. Never throws for network errors. Thread-safe.
std::optional<MemberStatus> probe_member(const std::string& endpoint,
                                         std::chrono::milliseconds timeout);

class EtcdEngineImpl;

// The Engine over an etcd cluster. Construction checks that some endpoint answers (throws
// connection_failed otherwise). Thread-safe.
class EtcdEngine : public Engine {
 public:
  explicit EtcdEngine(EtcdOptions options);
  ~EtcdEngine() override;
  EtcdEngine(const EtcdEngine&) = delete;
  EtcdEngine& operator=(const EtcdEngine&) = delete;

  // A session reading at one etcd revision (taken at its first read).
  std::unique_ptr<Session> begin() override;
  // Watches `key` through etcd's Watch API from revision version + 1; fires `state` once an event
  // leaves the key with a value other than `value_seen`, fails it with connection_failed if the
  // watch stream breaks.
  void watch(std::string key, std::optional<std::string> value_seen, Version version,
             std::shared_ptr<detail::WatchState> state) override;
  // Number of successful etcd Txns that wrote something (etcd has no group commit).
  std::uint64_t commit_batches() const override;
  // max_operations is the cluster's --max-txn-ops (URL option max_txn_ops=).
  TransactionLimits limits() const override;

  const EtcdOptions& options() const;

 private:
  std::shared_ptr<EtcdEngineImpl> impl_;
};

// kvq::open's entry for "etcd://..." URLs. Throws connection_string_invalid, connection_failed.
std::shared_ptr<Engine> open_etcd(std::string_view url);

}  // namespace kvq::engine::etcd

namespace kvq::engine {

// As etcd::open_etcd, from kvq::open's split URL: `body` is "host:port[,host:port...]" (a
// leading "//" is accepted too) and `query` the options (see etcd::parse_etcd_url).
std::shared_ptr<Engine> open_etcd(const std::string& body,
                                  const std::map<std::string, std::string>& query);

}  // namespace kvq::engine

#endif  // KVQ_SRC_ENGINE_ETCD_ETCD_ENGINE_H_
