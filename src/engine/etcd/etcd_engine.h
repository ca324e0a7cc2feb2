// Internal: the distributed engine, speaking etcd v3's gRPC API
// ("etcd://host:port[,host:port...]").
//
// Mapping of FoundationDB's model onto etcd (docs/engines.md has the long form):
//  - Read version = an etcd revision, taken by the transaction's first read; every later read is a
//    Range at that revision (etcd_session.h).
//  - Commit = one etcd Txn (committer.h): compares that fail iff something the transaction read
//    was written after the read version (txn_builder.h), and the buffered mutations collapsed per
//    key (collapse.h), checked against the cluster's --max-txn-ops and --max-request-bytes first.
//  - Atomic add on a value the transaction does not know is a blind "delta record" next to the
//    key (key_codec.h, key_group.h; folded now and then, delta_folder.h), so adds never read,
//    never conflict and never contend. Versionstamps come from a sequencer key pinned in a nested
//    Txn; if only the sequencer moved, the engine retries internally.
//  - kvq key k lives at prefix + escaped(k) (default prefix "kvq/", URL option prefix=).
//  - Members: one channel each (endpoint.h), failover for reads and commits (cluster.h); watches
//    (watcher.h); the optional MVCC window (compactor.h); URL options (etcd_options.h).
//
// Thread safety: EtcdEngine is thread-safe; a session is used by one thread at a time.
#ifndef KVQ_SRC_ENGINE_ETCD_ETCD_ENGINE_H_
#define KVQ_SRC_ENGINE_ETCD_ETCD_ENGINE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "engine/engine.h"
#include "engine/etcd/etcd_options.h"

namespace kvq::engine::etcd {

// What one member says about itself (Maintenance.Status).
struct MemberStatus {
  std::uint64_t member_id = 0;
  std::uint64_t leader_id = 0;  // 0 if the member knows no leader
  std::int64_t revision = 0;
};

// Asks the member at `endpoint` ("host:port") for its status, over TLS if `security` says so
// (Status needs no auth token); nullopt if it does not answer within `timeout`. Never throws for
// network errors. Thread-safe.
std::optional<MemberStatus> probe_member(const std::string& endpoint,
                                         std::chrono::milliseconds timeout,
                                         const EtcdSecurity& security = {});

class Cluster;
class Compactor;
class Watcher;

// The Engine over an etcd cluster. Construction checks that some endpoint answers (throws
// connection_failed otherwise, saying why: refused, TLS handshake, ...; connection_string_invalid
// for options without endpoints or prefix) and, if the options have a user, authenticates
// (authentication_failed for a wrong user or password). Thread-safe.
class EtcdEngine : public Engine {
 public:
  explicit EtcdEngine(EtcdOptions options);
  ~EtcdEngine() override;
  EtcdEngine(const EtcdEngine&) = delete;
  EtcdEngine& operator=(const EtcdEngine&) = delete;

  // A session reading at one etcd revision (taken at its first read).
  std::unique_ptr<Session> begin() override;
  // Watches `key` through etcd's Watch API from revision version + 1; fires `state` once an event
  // leaves the key with a value other than `value_seen`; a stream that breaks is opened again from
  // the same revision; fails it with connection_failed if a stream cannot be opened within the
  // failover budget.
  void watch(std::string key, std::optional<std::string> value_seen, Version version,
             std::shared_ptr<detail::WatchState> state) override;
  // Number of successful etcd Txns that wrote something (etcd has no group commit).
  std::uint64_t commit_batches() const override;
  // transaction_limits(options()): max_operations from max_txn_ops=, max_bytes from
  // max_request_bytes= less etcd's framing.
  TransactionLimits limits() const override;
  bool reads_take_round_trips() const override { return true; }

  const EtcdOptions& options() const;
  // Channels made to member `i` so far (1 + replacements of stuck ones); for tests.
  std::uint64_t channels_made(std::size_t i) const;
  // Successful Auth.Authenticate calls so far (1 at open with a user, + 1 per renewed token);
  // for tests.
  std::uint64_t authentications() const;

 private:
  std::shared_ptr<Cluster> cluster_;
  std::unique_ptr<Watcher> watcher_;
  std::unique_ptr<Compactor> compactor_;
};

// kvq::open's entry for "etcd://..." and "etcds://..." URLs. Throws connection_string_invalid,
// connection_failed, authentication_failed.
std::shared_ptr<Engine> open_etcd(std::string_view url);

}  // namespace kvq::engine::etcd

namespace kvq::engine {

// As etcd::open_etcd, from kvq::open's split URL: `tls` for etcds://, `body` is
// "[user:password@]host:port[,host:port...]" (a leading "//" is accepted too) and `query` the
// options (see etcd::parse_etcd_url).
std::shared_ptr<Engine> open_etcd(bool tls, const std::string& body,
                                  const std::map<std::string, std::string>& query);

}  // namespace kvq::engine

#endif  // KVQ_SRC_ENGINE_ETCD_ETCD_ENGINE_H_
