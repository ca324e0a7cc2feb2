// Internal (etcd engine): what every part of one engine shares: its options, key codec, the
// members' endpoints with the failover policy for reads and commits, and counters. Sessions,
// the watcher, the compactor and delta folding all talk to etcd through it.
//
// Example:
//   auto cluster = std::make_shared<Cluster>(parse_etcd_url(url));
//   etcdserverpb::RangeResponse r = cluster->range(request, "get");
#ifndef KVQ_SRC_ENGINE_ETCD_CLUSTER_H_
#define KVQ_SRC_ENGINE_ETCD_CLUSTER_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/etcd/auth_token.h"
#include "engine/etcd/endpoint.h"
#include "engine/etcd/etcd_options.h"
#include "engine/etcd/key_codec.h"
#include "engine/etcd/responses.h"
#include "engine/etcd/rpc_errors.h"
#include "rpc.pb.h"

namespace kvq::engine::etcd {

// Sets `ctx`'s deadline `timeout` from now.
void set_deadline(grpc::ClientContext& ctx, std::chrono::milliseconds timeout);

// The stamped commits of one process take turns (committer.h): at once, they would race on the
// versionstamp sequencer, and each round all but one would fail and be sent again (measured: 7
// Txns per stamped commit with 32 threads registering high-contention pops). The commit holding
// the turn leaves the sequencer as it wrote it in `known`, so that the next need not read it. A
// commit that waits longer than an RPC timeout for its turn goes without it (a stuck commit must
// not hold up the others for longer than it takes to fail).
struct StampTurns {
  std::timed_mutex mu;
  std::optional<Sequencer> known;  // guarded by mu; nullopt: read the sequencer first
};

// The shared state of one engine. Every RPC it sends carries the auth token (if the URL has a
// user) and is sent once more after renewing the token if etcd refuses it (authed). Thread-safe.
class Cluster {
 public:
  using Clock = std::chrono::steady_clock;

  // One endpoint per options.endpoints (none is contacted yet).
  explicit Cluster(EtcdOptions options);

  const EtcdOptions& options() const { return options_; }
  const KeyCodec& codec() const { return codec_; }

  // Runs a read-only RPC with failover: `call(stubs, ctx)` goes to the preferred endpoint and, on
  // UNAVAILABLE / DEADLINE_EXCEEDED, to the next ones (with back-off after each round) until the
  // failover budget is spent. Returns the last status (transport errors only after the budget).
  template <typename Call>
  grpc::Status read_rpc(Call&& call);

  // A Range with failover; at `revision` (> 0) a serializable read, retried linearizably if the
  // member has not applied that revision yet. Throws as throw_rpc_error.
  etcdserverpb::RangeResponse range(etcdserverpb::RangeRequest request, std::string_view what);

  // A read-only Txn (range operations only) with failover, as range(); returns its status
  // instead of throwing (callers that can do without it).
  grpc::Status read_txn(const etcdserverpb::TxnRequest& request,
                        etcdserverpb::TxnResponse* response);

  // Sends a commit Txn, preferring a member whose channel is not known down. Retries on other
  // endpoints only while the failure shows the request never left this process; any other
  // transport failure is commit_unknown_result. Throws as throw_rpc_error: NOSPACE is
  // commit_unknown_result (out_of_space), and from then on, while a probe (probe_space)
  // finds the cluster still out of space, each commit is database_full without being sent, so a
  // retry loop ends instead of spinning on unknown results.
  etcdserverpb::TxnResponse commit_rpc(const etcdserverpb::TxnRequest& request);

  // One attempt of a Txn on the preferred endpoint (best-effort work such as folding deltas).
  grpc::Status txn_once(const etcdserverpb::TxnRequest& request,
                        etcdserverpb::TxnResponse* response);
  // One attempt of a Compact on the preferred endpoint.
  grpc::Status compact_once(std::int64_t revision);

  // OK if any endpoint answers a Status call within the RPC timeout (waiting for the channel to
  // connect, so a channel still in reconnect back-off does not count as down); else the status
  // of a last attempt that does not wait (so it says why: refused, TLS handshake, ...).
  grpc::Status probe_endpoints();
  // If the URL has a user: gets the first token (Authenticate on the first endpoint that
  // answers). Throws authentication_failed (wrong user or password), connection_failed.
  void authenticate();

  // Runs `call(ctx)` with a fresh context (deadline: the RPC timeout; the auth token attached);
  // if etcd refuses the token, renews it over `stubs` and runs the call once more. Returns the
  // last status; a renewal that cannot reach the member is UNAVAILABLE "failed to connect ..."
  // (never_sent: the call was not applied).
  template <typename Call>
  grpc::Status authed(const Stubs& stubs, Call&& call);
  AuthToken& auth() { return auth_; }

  // The preferred endpoint now; move_on(i) makes the next one preferred if i still is.
  std::size_t preferred() const { return preferred_.load() % endpoints_.size(); }
  void move_on(std::size_t from) { preferred_.compare_exchange_strong(from, next(from)); }
  Endpoint& endpoint(std::size_t i) { return *endpoints_[i]; }
  std::size_t endpoint_count() const { return endpoints_.size(); }

  // Taken by each stamped commit for the time of its Txns (see StampTurns).
  StampTurns& stamp_turns() { return stamp_turns_; }
  // Counts a successful commit Txn.
  void count_batch() { batches_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t batches() const { return batches_.load(std::memory_order_relaxed); }
  // The highest revision this process has seen committed or read.
  std::int64_t latest_seen() const { return latest_seen_.load(std::memory_order_acquire); }
  // Notes that `revision` was seen.
  void saw(std::int64_t revision);
  // The mark of a key one thread is folding (delta_folder.h); destroying it lifts the mark.
  class FoldingMark {
   public:
    FoldingMark(Cluster& cluster, std::string key) : cluster_(cluster), key_(std::move(key)) {}
    ~FoldingMark();
    FoldingMark(const FoldingMark&) = delete;
    FoldingMark& operator=(const FoldingMark&) = delete;

   private:
    Cluster& cluster_;
    const std::string key_;
  };
  // Marks `key` (an etcd key) as folded by the caller until the mark is destroyed; null if
  // another thread folding through this Cluster (this opened Database) holds its mark now: a
  // second fold of the key would only race that one.
  std::unique_ptr<FoldingMark> start_folding(const std::string& key);

 private:
  std::size_t next(std::size_t i) const { return (i + 1) % endpoints_.size(); }
  // After a failed round over every endpoint, sleeps a little (attempt-proportional, <= 500 ms).
  void back_off(int attempt) const;
  // The endpoint a commit should go to: the preferred one unless its channel is known down and
  // another's is not.
  std::size_t commit_endpoint();
  // Probes whether the cluster refuses writes for lack of space now: a Txn with one put behind a
  // compare that never holds (so it writes nothing in any case). NOSPACE if it does; else OK (also
  // when the probe failed otherwise: then it is not known).
  grpc::Status probe_space();

  const EtcdOptions options_;
  const KeyCodec codec_;
  AuthToken auth_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::atomic<std::size_t> preferred_{0};
  std::atomic<std::uint64_t> batches_{0};
  std::atomic<std::int64_t> latest_seen_{0};
  // A commit was answered NOSPACE: later commits probe first (probe_space) until one finds room.
  std::atomic<bool> out_of_space_{false};
  StampTurns stamp_turns_;
  std::mutex folding_mu_;
  std::set<std::string> folding_;  // guarded by folding_mu_
};

template <typename Call>
grpc::Status Cluster::read_rpc(Call&& call) {
  const auto start = Clock::now();
  for (int attempt = 1;; ++attempt) {
    const std::size_t i = preferred();
    Endpoint& ep = *endpoints_[i];
    std::shared_ptr<const Stubs> stubs = ep.stubs();
    grpc::Status s = authed(*stubs, [&](grpc::ClientContext& ctx) { return call(*stubs, ctx); });
    ep.note(stubs, s);
    if (s.ok() || !is_transport_error(s)) return s;
    move_on(i);
    if (Clock::now() - start >= options_.failover_budget) return s;
    back_off(attempt);
  }
}

template <typename Call>
grpc::Status Cluster::authed(const Stubs& stubs, Call&& call) {
  for (bool renewed = false;; renewed = true) {
    grpc::ClientContext ctx;
    set_deadline(ctx, options_.rpc_timeout);
    const std::uint64_t generation = auth_.attach(ctx);
    grpc::Status s = call(ctx);
    if (renewed || !auth_.enabled() || !token_refused(s)) return s;
    grpc::Status renewal = auth_.renew(stubs, generation, options_.rpc_timeout);
    if (is_transport_error(renewal)) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "failed to connect to renew the auth token (" + describe(renewal) + ")");
    }
    if (!renewal.ok()) return renewal;
  }
}

}  // namespace kvq::engine::etcd

#endif  // KVQ_SRC_ENGINE_ETCD_CLUSTER_H_
