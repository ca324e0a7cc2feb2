// Internal (etcd engine): the options of an etcd:// URL and their parser.
//
// Example:
//   EtcdOptions o = parse_etcd_url("etcd://127.0.0.1:23790?prefix=app/&max_txn_ops=256");
//   o.endpoints == {"127.0.0.1:23790"}; o.max_txn_ops == 256;
#ifndef KVQ_SRC_ENGINE_ETCD_ETCD_OPTIONS_H_
#define KVQ_SRC_ENGINE_ETCD_ETCD_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "engine/etcd/etcd_security.h"
#include "kvq/database.h"

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
  // The cluster's --max-txn-ops (URL option max_txn_ops=): a commit whose Txn holds more compares
  // or more operations than this fails with transaction_too_large before it is sent. Default 128
  // (etcd's default). etcd does not report its value over the API: set both alike.
  int max_txn_ops = 128;
  // The cluster's --max-request-bytes (URL option max_request_bytes=): a commit whose request is
  // larger fails with transaction_too_large before it is sent. Default 1,572,864 (etcd's
  // default). etcd does not report its value over the API: set both alike.
  std::size_t max_request_bytes = 1'572'864;
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
  // TLS (etcds://, ca_file=, cert_file=, key_file=) and authentication (user:password@,
  // user=, password_file=, plaintext_auth=); see etcd_security.h.
  EtcdSecurity security;
};

// Bytes of a commit request etcd adds around the Txn before it compares the size with
// --max-request-bytes (its raft request wrapper and header), with room to spare.
inline constexpr std::size_t kRaftRequestFraming = 512;

// What a transaction may hold on a cluster with these options (Engine::limits()):
// max_operations = max_txn_ops; max_bytes = max_request_bytes less the framing etcd adds
// (kRaftRequestFraming) and the bytes a Txn spends per operation beyond the keys, values and
// conflict ranges a transaction's approximate_size() counts (key prefix and escaping, protobuf
// tags, revisions, delta ids, keys pinned by compares: up to 2 * prefix + 128 bytes each), at
// most kMaxTransactionSize.
TransactionLimits transaction_limits(const EtcdOptions& options);

// Parses "etcd[s]://[user[:password]@]host:port[,host:port...][?prefix=P&timeout_ms=N
// &failover_ms=N&max_txn_ops=N&max_request_bytes=N&mvcc_window_ms=N&fast_first_read=0|1
// &ca_file=F&cert_file=F&key_file=F&user=U&password_file=F&plaintext_auth=0|1]" and reads the
// files named. Throws connection_string_invalid for anything malformed (no endpoint, bad port,
// unknown option, a value out of range, a max_request_bytes too small for max_txn_ops operations,
// a bad combination or unreadable file of the security options); its message never holds the
// password.
EtcdOptions parse_etcd_url(std::string_view url);

}  // namespace kvq::engine::etcd

#endif  // KVQ_SRC_ENGINE_ETCD_ETCD_OPTIONS_H_
