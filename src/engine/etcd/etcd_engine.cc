#include "engine/etcd/etcd_engine.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <condition_variable>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "kv.pb.h"
#include "kvq/error.h"
#include "rpc.grpc.pb.h"
#include "rpc.pb.h"

#if __has_include("txn/watch_state.h")
#include "txn/watch_state.h"
#define KVQ_ETCD_HAVE_WATCH_STATE 1
#endif

namespace kvq::engine::etcd {
namespace {

namespace pb = ::etcdserverpb;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// Errors.

bool is_transport_error(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

// True if the RPC certainly never reached a server (so retrying a commit elsewhere is safe).
bool never_sent(const grpc::Status& s) {
  if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return false;
  const std::string& m = s.error_message();
  return m.find("failed to connect") != std::string::npos ||
         m.find("Connection refused") != std::string::npos ||
         m.find("connections to all backends failing") != std::string::npos;
}

std::string describe(const grpc::Status& s) {
  return "gRPC code " + std::to_string(static_cast<int>(s.error_code())) + ": " +
         s.error_message();
}

// Maps a failed etcd RPC to a kvq::Error. `commit`: the RPC was a (possibly applied) commit.
[[noreturn]] void throw_rpc_error(const grpc::Status& s, std::string_view what, bool commit) {
  const std::string& m = s.error_message();
  auto has = [&](const char* text) { return m.find(text) != std::string::npos; };
  std::string where = "etcd " + std::string(what) + ": ";
  if (has("compacted")) {
    throw Error(ErrorCode::kTransactionTooOld,
                where + "read revision was compacted away (" + describe(s) + ")");
  }
  if (has("database space exceeded") || has("NOSPACE")) {
    throw Error(ErrorCode::kDatabaseFull,
                where + "the cluster refuses writes: database space exceeded (raise "
                        "--quota-backend-bytes, compact and defragment, then disarm the NOSPACE "
                        "alarm) (" + describe(s) + ")");
  }
  if (has("too many operations in txn request")) {
    throw Error(ErrorCode::kTransactionTooLarge,
                where + "more compares or operations than the cluster's --max-txn-ops (" +
                    describe(s) + ")");
  }
  if (has("request is too large") || has("larger than max") ||
      s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    throw Error(ErrorCode::kTransactionTooLarge,
                where + "request larger than the cluster's --max-request-bytes (" + describe(s) +
                    ")");
  }
  if (is_transport_error(s)) {
    if (commit) {
      throw Error(ErrorCode::kCommitUnknownResult,
                  where + "lost contact during commit; it may or may not have been applied (" +
                      describe(s) + ")");
    }
    throw Error(ErrorCode::kConnectionFailed, where + "no endpoint answered (" + describe(s) + ")");
  }
  if (has("duplicate key given in txn request")) {
    throw Error(ErrorCode::kInternalError, where + "kvq sent an invalid Txn (" + describe(s) + ")");
  }
  throw Error(ErrorCode::kUnknownError, where + describe(s));
}

// ---------------------------------------------------------------------------------------------
// Byte helpers.

std::string be64(std::uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return out;
}

std::uint64_t from_be64(std::string_view s) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < s.size() && i < 8; ++i) {
    v = (v << 8) | static_cast<unsigned char>(s[i]);
  }
  return v;
}

// FoundationDB's ADD: little-endian, result has operand's length, carries past it are dropped.
std::string add_le(const std::optional<std::string>& current, std::string_view operand) {
  std::string out(operand.size(), '\0');
  unsigned carry = 0;
  for (std::size_t i = 0; i < operand.size(); ++i) {
    unsigned a = (current && i < current->size()) ? static_cast<unsigned char>((*current)[i]) : 0;
    unsigned sum = a + static_cast<unsigned char>(operand[i]) + carry;
    out[i] = static_cast<char>(sum & 0xff);
    carry = sum >> 8;
  }
  return out;
}

std::uint32_t le32(std::string_view s) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(s[0])) |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[1])) << 8 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[2])) << 16 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[3])) << 24;
}

// Replaces the 10-byte placeholder of a versionstamped key/value (offset in the last 4 bytes).
std::string apply_stamp(std::string_view with_offset, const std::string& stamp) {
  if (with_offset.size() < 4) {
    throw Error(ErrorCode::kClientInvalidOperation, "etcd: versionstamp operand lacks its offset");
  }
  std::string_view body = with_offset.substr(0, with_offset.size() - 4);
  std::uint32_t offset = le32(with_offset.substr(with_offset.size() - 4));
  if (static_cast<std::uint64_t>(offset) + 10 > body.size()) {
    throw Error(ErrorCode::kClientInvalidOperation,
                "etcd: versionstamp offset " + std::to_string(offset) + " outside the operand");
  }
  std::string out(body);
  out.replace(offset, 10, stamp);
  return out;
}

std::string key_after(std::string_view key) {
  std::string out(key);
  out.push_back('\0');
  return out;
}

bool is_single_key(const KeyRange& r) {
  return r.end.size() == r.begin.size() + 1 && r.end.back() == '\0' &&
         std::string_view(r.end).substr(0, r.begin.size()) == r.begin;
}

// Sorted, merged (overlapping or touching) copy of `ranges`, empty ones dropped.
std::vector<KeyRange> merge_ranges(std::vector<KeyRange> ranges) {
  std::erase_if(ranges, [](const KeyRange& r) { return r.begin >= r.end; });
  std::sort(ranges.begin(), ranges.end(),
            [](const KeyRange& a, const KeyRange& b) { return a.begin < b.begin; });
  std::vector<KeyRange> out;
  for (auto& r : ranges) {
    if (!out.empty() && r.begin <= out.back().end) {
      if (r.end > out.back().end) out.back().end = std::move(r.end);
    } else {
      out.push_back(std::move(r));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Mutations collapsed into one etcd op per key.

struct Collapsed {
  std::map<std::string, std::optional<std::string>> final_values;  // key -> value (nullopt: delete)
  std::vector<KeyRange> cleared;                                   // merged clear ranges
  std::set<std::string> needs_base;  // keys with atomic adds on a value not known yet
  bool needs_stamp = false;
};

// Collapses `mutations` (in order). `bases`: committed values of keys with pending adds (absent
// entries stay unresolved, listed in needs_base). `stamp`: the 10-byte versionstamp ("" = none
// yet; versionstamped ops are then only noted in needs_stamp).
Collapsed collapse(const std::vector<Mutation>& mutations,
                   const std::map<std::string, std::optional<std::string>>& bases,
                   const std::string& stamp) {
  struct State {
    bool known = false;  // value below is the final value
    std::optional<std::string> value;
    std::vector<std::string> pending;  // add operands on the committed value (if !known)
  };
  std::map<std::string, State> keys;
  std::vector<KeyRange> cleared;
  auto covered = [&](const std::string& key) {
    for (const KeyRange& r : cleared) {
      if (r.begin <= key && key < r.end) return true;
    }
    return false;
  };
  auto state_of = [&](const std::string& key) -> State& {
    auto it = keys.find(key);
    if (it != keys.end()) return it->second;
    State s;
    if (covered(key)) s.known = true;  // cleared earlier in this transaction: absent
    return keys.emplace(key, std::move(s)).first->second;
  };
  Collapsed out;
  for (const Mutation& m : mutations) {
    switch (m.type) {
      case MutationType::kSet: {
        State& s = state_of(m.param1);
        s.known = true;
        s.value = m.param2;
        s.pending.clear();
        break;
      }
      case MutationType::kClear: {
        State& s = state_of(m.param1);
        s.known = true;
        s.value.reset();
        s.pending.clear();
        break;
      }
      case MutationType::kClearRange: {
        if (m.param1 >= m.param2) break;
        keys.erase(keys.lower_bound(m.param1), keys.lower_bound(m.param2));
        cleared.push_back({m.param1, m.param2});
        break;
      }
      case MutationType::kAddValue: {
        State& s = state_of(m.param1);
        if (s.known) {
          s.value = add_le(s.value, m.param2);
        } else {
          s.pending.push_back(m.param2);
        }
        break;
      }
      case MutationType::kSetVersionstampedKey: {
        out.needs_stamp = true;
        if (stamp.empty()) break;
        State& s = state_of(apply_stamp(m.param1, stamp));
        s.known = true;
        s.value = m.param2;
        s.pending.clear();
        break;
      }
      case MutationType::kSetVersionstampedValue: {
        out.needs_stamp = true;
        if (stamp.empty()) break;
        State& s = state_of(m.param1);
        s.known = true;
        s.value = apply_stamp(m.param2, stamp);
        s.pending.clear();
        break;
      }
    }
  }
  out.cleared = merge_ranges(std::move(cleared));
  for (auto& [key, s] : keys) {
    if (s.known) {
      out.final_values.emplace(key, std::move(s.value));
      continue;
    }
    auto base = bases.find(key);
    if (base == bases.end()) {
      out.needs_base.insert(key);
      continue;
    }
    std::optional<std::string> v = base->second;
    for (const std::string& operand : s.pending) v = add_le(v, operand);
    out.final_values.emplace(key, std::move(v));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

struct Endpoint {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Watch::Stub> watch;
  std::unique_ptr<pb::Maintenance::Stub> maintenance;
};

std::shared_ptr<grpc::Channel> make_channel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

void set_deadline(grpc::ClientContext& ctx, std::chrono::milliseconds timeout) {
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The shared state of one engine (sessions and watch threads keep it alive).

class EtcdEngineImpl : public std::enable_shared_from_this<EtcdEngineImpl> {
 public:
  explicit EtcdEngineImpl(EtcdOptions options) : opt_(std::move(options)) {
    for (const std::string& address : opt_.endpoints) {
      Endpoint ep;
      ep.address = address;
      ep.channel = make_channel(address);
      ep.kv = pb::KV::NewStub(ep.channel);
      ep.watch = pb::Watch::NewStub(ep.channel);
      ep.maintenance = pb::Maintenance::NewStub(ep.channel);
      endpoints_.push_back(std::move(ep));
    }
  }

  ~EtcdEngineImpl() { stop_watches(); }

  const EtcdOptions& options() const { return opt_; }
  std::string to_etcd(std::string_view key) const { return opt_.prefix + std::string(key); }
  std::string from_etcd(const std::string& key) const { return key.substr(opt_.prefix.size()); }
  std::string sequencer_key() const { return opt_.prefix + "\xff\xff\xff/kvq/versionstamp"; }

  // Runs a read-only RPC with failover: `call(endpoint, ctx)` is tried on the preferred endpoint,
  // and on UNAVAILABLE / DEADLINE_EXCEEDED on the next ones, until the failover budget is spent.
  // Returns the last status (transport errors only after the budget).
  template <typename Call>
  grpc::Status read_rpc(Call&& call) {
    const auto start = Clock::now();
    const std::size_t n = endpoints_.size();
    for (int attempt = 1;; ++attempt) {
      std::size_t i = preferred_.load();
      grpc::ClientContext ctx;
      set_deadline(ctx, opt_.rpc_timeout);
      grpc::Status s = call(endpoints_[i], ctx);
      if (s.ok() || !is_transport_error(s)) return s;
      preferred_.compare_exchange_strong(i, (i + 1) % n);
      if (Clock::now() - start >= opt_.failover_budget) return s;
      if (attempt % n == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50 * attempt, 500)));
      }
    }
  }

  // Sends a commit Txn. Retries on other endpoints only while the failure shows the request never
  // left this process; any other transport failure is commit_unknown_result.
  pb::TxnResponse commit_rpc(const pb::TxnRequest& request) {
    const auto start = Clock::now();
    const std::size_t n = endpoints_.size();
    for (int attempt = 1;; ++attempt) {
      std::size_t i = preferred_.load();
      if (n > 1 && endpoints_[i].channel->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
        // Known to be down: prefer another member (the request has not been sent anywhere yet).
        for (std::size_t k = 1; k < n; ++k) {
          std::size_t j = (i + k) % n;
          if (endpoints_[j].channel->GetState(false) != GRPC_CHANNEL_TRANSIENT_FAILURE) {
            preferred_.compare_exchange_strong(i, j);
            i = j;
            break;
          }
        }
      }
      grpc::ClientContext ctx;
      set_deadline(ctx, opt_.rpc_timeout);
      pb::TxnResponse response;
      grpc::Status s = endpoints_[i].kv->Txn(&ctx, request, &response);
      if (s.ok()) return response;
      if (is_transport_error(s)) preferred_.compare_exchange_strong(i, (i + 1) % n);
      if (never_sent(s) && Clock::now() - start < opt_.failover_budget) {
        if (attempt % n == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50 * attempt, 500)));
        }
        continue;
      }
      throw_rpc_error(s, "commit", /*commit=*/true);
    }
  }

  // A Range with failover; at `revision` (> 0) a serializable read, retried linearizably if the
  // member has not applied that revision yet.
  pb::RangeResponse range(pb::RangeRequest request, std::string_view what) {
    pb::RangeResponse response;
    grpc::Status s = read_rpc([&](Endpoint& ep, grpc::ClientContext& ctx) {
      response.Clear();
      return ep.kv->Range(&ctx, request, &response);
    });
    if (!s.ok() && request.serializable() &&
        s.error_message().find("future revision") != std::string::npos) {
      request.set_serializable(false);
      s = read_rpc([&](Endpoint& ep, grpc::ClientContext& ctx) {
        response.Clear();
        return ep.kv->Range(&ctx, request, &response);
      });
    }
    if (!s.ok()) throw_rpc_error(s, what, /*commit=*/false);
    return response;
  }

  // True if any endpoint answers a Status call within the RPC timeout.
  bool any_endpoint_answers() {
    for (int round = 0; round < 3; ++round) {
      for (Endpoint& ep : endpoints_) {
        grpc::ClientContext ctx;
        set_deadline(ctx, opt_.rpc_timeout);
        pb::StatusRequest request;
        pb::StatusResponse response;
        if (ep.maintenance->Status(&ctx, request, &response).ok()) return true;
      }
    }
    return false;
  }

  void count_batch() { batches_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t batches() const { return batches_.load(std::memory_order_relaxed); }

  void start_watch(std::string key, std::optional<std::string> value_seen, Version version,
                   std::shared_ptr<detail::WatchState> state);

 private:
  struct ActiveWatch {
    std::shared_ptr<grpc::ClientContext> ctx;
    std::shared_ptr<detail::WatchState> state;
    std::thread thread;
    bool done = false;  // the thread has finished (join it, then drop the entry)
  };

  void run_watch(std::list<ActiveWatch>::iterator self, std::string key,
                 std::optional<std::string> value_seen, Version version);
  void monitor_watches();

 public:
  // Fails every armed watch with operation_cancelled and joins the watch threads. Idempotent.
  void stop_watches();

 private:

  EtcdOptions opt_;
  std::vector<Endpoint> endpoints_;
  std::atomic<std::size_t> preferred_{0};
  std::atomic<std::uint64_t> batches_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::list<ActiveWatch> watches_;
  std::thread monitor_;
};

// ---------------------------------------------------------------------------------------------
// Watches: one thread per armed watch, reading an etcd Watch stream; a monitor thread cancels
// the streams of watches that were cancelled (or fired/failed) from elsewhere.

namespace {

#ifdef KVQ_ETCD_HAVE_WATCH_STATE
bool watch_finished(const detail::WatchState& state) { return state.ready(); }
void watch_fire(detail::WatchState& state) { state.fire(); }
void watch_fail(detail::WatchState& state, const Error& e) { state.fail(e); }
#else
bool watch_finished(const detail::WatchState&) { return true; }
void watch_fire(detail::WatchState&) {}
void watch_fail(detail::WatchState&, const Error&) {}
#endif

}  // namespace

void EtcdEngineImpl::start_watch(std::string key, std::optional<std::string> value_seen,
                                 Version version, std::shared_ptr<detail::WatchState> state) {
  std::lock_guard lock(mu_);
  if (stopping_) {
    watch_fail(*state, Error(ErrorCode::kOperationCancelled, "etcd: engine shut down"));
    return;
  }
  if (!monitor_.joinable()) monitor_ = std::thread([this] { monitor_watches(); });
  watches_.push_back(ActiveWatch{std::make_shared<grpc::ClientContext>(), std::move(state), {}});
  auto it = std::prev(watches_.end());
  // The thread starts by taking mu_, so it sees its entry complete.
  it->thread = std::thread([this, it, key = std::move(key), value_seen = std::move(value_seen),
                            version]() mutable { run_watch(it, std::move(key), value_seen, version); });
}

void EtcdEngineImpl::run_watch(std::list<ActiveWatch>::iterator self, std::string key,
                               std::optional<std::string> value_seen, Version version) {
  std::shared_ptr<grpc::ClientContext> ctx;
  std::shared_ptr<detail::WatchState> state;
  {
    std::lock_guard lock(mu_);
    ctx = self->ctx;
    state = self->state;
  }
  auto finish = [&] {
    std::lock_guard lock(mu_);
    self->done = true;
    self->state.reset();
  };
  const std::string etcd_key = to_etcd(key);
  try {
    std::size_t ep = preferred_.load() % endpoints_.size();
    auto stream = endpoints_[ep].watch->Watch(ctx.get());
    pb::WatchRequest request;
    auto* create = request.mutable_create_request();
    create->set_key(etcd_key);
    create->set_start_revision(version + 1);
    if (!stream->Write(request)) {
      grpc::Status s = stream->Finish();
      throw Error(ErrorCode::kConnectionFailed, "etcd watch: cannot open stream (" + describe(s) +
                                                    ")");
    }
    pb::WatchResponse response;
    while (stream->Read(&response)) {
      if (response.canceled()) {
        if (response.compact_revision() > 0) {
          // The start revision was compacted: compare with the current value instead.
          pb::RangeRequest rr;
          rr.set_key(etcd_key);
          pb::RangeResponse current = range(rr, "watch");
          std::optional<std::string> now;
          if (current.kvs_size() > 0) now = current.kvs(0).value();
          if (now != value_seen) {
            watch_fire(*state);
            break;
          }
          throw Error(ErrorCode::kTransactionTooOld,
                      "etcd watch: start revision compacted and value unchanged; re-arm");
        }
        throw Error(ErrorCode::kConnectionFailed,
                    "etcd watch: cancelled by server: " + response.cancel_reason());
      }
      bool fired = false;
      for (const auto& event : response.events()) {
        std::optional<std::string> now;
        if (event.type() == mvccpb::Event::PUT) now = event.kv().value();
        if (now != value_seen) {
          fired = true;
          break;
        }
      }
      if (fired) {
        watch_fire(*state);
        break;
      }
    }
    ctx->TryCancel();
    grpc::Status s = stream->Finish();
    if (!watch_finished(*state)) {
      throw Error(ErrorCode::kConnectionFailed, "etcd watch: stream ended (" + describe(s) + ")");
    }
  } catch (const Error& e) {
    if (!watch_finished(*state)) watch_fail(*state, e);
  }
  finish();
}

void EtcdEngineImpl::monitor_watches() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(50));
    for (auto it = watches_.begin(); it != watches_.end();) {
      if (it->done) {
        if (it->thread.joinable()) it->thread.join();
        it = watches_.erase(it);
        continue;
      }
      if (stopping_ || (it->state && watch_finished(*it->state))) it->ctx->TryCancel();
      ++it;
    }
  }
}

void EtcdEngineImpl::stop_watches() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (ActiveWatch& w : watches_) {
      if (w.state && !watch_finished(*w.state)) {
        watch_fail(*w.state, Error(ErrorCode::kOperationCancelled, "etcd: engine shut down"));
      }
      w.ctx->TryCancel();
    }
  }
  cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  {
    std::lock_guard lock(mu_);
    for (ActiveWatch& w : watches_) {
      if (w.thread.joinable()) threads.push_back(std::move(w.thread));
    }
  }
  for (std::thread& t : threads) t.join();
  std::lock_guard lock(mu_);
  watches_.clear();
}

// ---------------------------------------------------------------------------------------------
// Session.

namespace {

class EtcdSession : public Session {
 public:
  explicit EtcdSession(std::shared_ptr<EtcdEngineImpl> engine) : engine_(std::move(engine)) {}

  Version read_version() override {
    if (revision_ < 0) {
      pb::RangeRequest request;
      request.set_key(engine_->to_etcd(""));
      request.set_count_only(true);
      revision_ = engine_->range(request, "read version").header().revision();
    }
    return revision_;
  }

  std::optional<std::string> get(std::string_view key) override {
    pb::RangeRequest request;
    request.set_key(engine_->to_etcd(key));
    pb::RangeResponse response = read(request, "get");
    if (response.kvs_size() == 0) return std::nullopt;
    const mvccpb::KeyValue& kv = response.kvs(0);
    seen_[std::string(key)] = kv.mod_revision();
    return kv.value();
  }

  std::vector<KeyValue> get_range(std::string_view begin, std::string_view end, int limit,
                                  bool reverse) override {
    if (begin >= end) {
      read_version();
      return {};
    }
    pb::RangeRequest request;
    request.set_key(engine_->to_etcd(begin));
    request.set_range_end(engine_->to_etcd(end));
    if (limit > 0) request.set_limit(limit);
    if (reverse) {
      request.set_sort_order(pb::RangeRequest::DESCEND);
      request.set_sort_target(pb::RangeRequest::KEY);
    }
    pb::RangeResponse response = read(request, "get_range");
    std::vector<KeyValue> out;
    out.reserve(response.kvs_size());
    for (const mvccpb::KeyValue& kv : response.kvs()) {
      std::string key = engine_->from_etcd(kv.key());
      seen_[key] = kv.mod_revision();
      out.push_back(KeyValue{std::move(key), kv.value()});
      if (limit > 0 && static_cast<int>(out.size()) >= limit) break;
    }
    return out;
  }

  CommitResult commit(CommitRequest request) override {
    const int max_ops = engine_->options().max_txn_ops;
    std::vector<pb::Compare> conflicts = conflict_compares(request);
    if (static_cast<int>(conflicts.size()) > max_ops) {
      throw Error(ErrorCode::kTransactionTooLarge,
                  "etcd: the transaction's reads need " + std::to_string(conflicts.size()) +
                      " compares, more than etcd's --max-txn-ops (" + std::to_string(max_ops) +
                      "); read fewer keys or use snapshot reads");
    }

    std::map<std::string, std::optional<std::string>> bases;
    std::map<std::string, std::int64_t> base_mods;  // etcd key -> mod_revision pinned
    Collapsed first = collapse(request.mutations, bases, "");
    const bool atomic = !first.needs_base.empty() || first.needs_stamp;
    std::vector<std::string> pinned;  // etcd keys whose current value the commit depends on
    for (const std::string& key : first.needs_base) pinned.push_back(engine_->to_etcd(key));
    if (first.needs_stamp) pinned.push_back(engine_->sequencer_key());
    if (static_cast<int>(pinned.size()) > max_ops) {
      throw Error(ErrorCode::kTransactionTooLarge,
                  "etcd: " + std::to_string(pinned.size()) +
                      " atomic operations in one transaction, more than etcd's --max-txn-ops (" +
                      std::to_string(max_ops) + ")");
    }
    std::map<std::string, std::pair<std::optional<std::string>, std::int64_t>> current;
    if (atomic) current = read_current(pinned);

    for (int attempt = 0;; ++attempt) {
      std::string stamp;
      std::uint64_t sequence = 0;
      bases.clear();
      for (const std::string& key : first.needs_base) {
        bases[key] = current.at(engine_->to_etcd(key)).first;
      }
      if (first.needs_stamp) {
        const auto& seq = current.at(engine_->sequencer_key());
        sequence = (seq.first ? from_be64(*seq.first) : 0) + 1;
        stamp = be64(sequence) + std::string(2, '\0');
      }
      Collapsed done = collapse(request.mutations, bases, stamp);
      std::vector<pb::RequestOp> ops = write_ops(done);
      if (first.needs_stamp) {
        pb::RequestOp op;
        op.mutable_request_put()->set_key(engine_->sequencer_key());
        op.mutable_request_put()->set_value(be64(sequence));
        ops.push_back(std::move(op));
      }
      if (static_cast<int>(ops.size()) > max_ops) {
        throw Error(ErrorCode::kTransactionTooLarge,
                    "etcd: the transaction's writes need " + std::to_string(ops.size()) +
                        " operations (one per key, clear ranges split around later sets), more "
                        "than etcd's --max-txn-ops (" + std::to_string(max_ops) + ")");
      }

      pb::TxnRequest txn;
      for (pb::Compare& c : conflicts) *txn.add_compare() = c;
      if (!atomic) {
        for (pb::RequestOp& op : ops) *txn.add_success() = std::move(op);
      } else {
        pb::TxnRequest* inner = txn.add_success()->mutable_request_txn();
        for (const std::string& key : pinned) {
          pb::Compare* c = inner->add_compare();
          c->set_key(key);
          c->set_target(pb::Compare::MOD);
          c->set_result(pb::Compare::EQUAL);
          c->set_mod_revision(current.at(key).second);
          pb::RequestOp* reread = inner->add_failure();
          reread->mutable_request_range()->set_key(key);
        }
        for (pb::RequestOp& op : ops) *inner->add_success() = std::move(op);
      }

      pb::TxnResponse response = engine_->commit_rpc(txn);
      if (!response.succeeded()) {
        throw Error(ErrorCode::kNotCommitted,
                    "etcd: a key this transaction read was written after its read version");
      }
      if (atomic) {
        const pb::TxnResponse& inner = response.responses(0).response_txn();
        if (!inner.succeeded()) {
          // Only the values pinned for atomic ops moved: take the fresh ones and go again.
          if (attempt >= 1000) {
            throw Error(ErrorCode::kNotCommitted, "etcd: atomic operations kept being overtaken");
          }
          for (int i = 0; i < inner.responses_size(); ++i) {
            const pb::RangeResponse& rr = inner.responses(i).response_range();
            auto& slot = current[pinned[i]];
            if (rr.kvs_size() > 0) {
              slot = {rr.kvs(0).value(), rr.kvs(0).mod_revision()};
            } else {
              slot = {std::nullopt, 0};
            }
          }
          continue;
        }
      }
      engine_->count_batch();
      CommitResult result;
      result.version = response.header().revision();
      result.versionstamp =
          first.needs_stamp ? stamp
                            : be64(static_cast<std::uint64_t>(result.version)) + std::string(2, '\0');
      return result;
    }
  }

 private:
  // A read at this session's revision (the first read fixes the revision).
  pb::RangeResponse read(pb::RangeRequest& request, std::string_view what) {
    if (revision_ >= 0) {
      request.set_revision(revision_);
      request.set_serializable(true);
    }
    pb::RangeResponse response = engine_->range(request, what);
    if (revision_ < 0) revision_ = response.header().revision();
    return response;
  }

  // The compares that fail iff a read-conflict range was written after the read version.
  std::vector<pb::Compare> conflict_compares(const CommitRequest& request) {
    std::vector<pb::Compare> out;
    if (request.read_version < 0 || request.read_conflicts.empty()) return out;
    const Version rv = request.read_version;
    std::set<std::string> pinned_keys;
    auto pin_seen = [&](const std::string& key, std::int64_t mod) {
      if (!pinned_keys.insert(key).second) return;
      pb::Compare c;
      c.set_key(engine_->to_etcd(key));
      c.set_target(pb::Compare::MOD);
      c.set_result(pb::Compare::EQUAL);
      c.set_mod_revision(mod);
      out.push_back(std::move(c));
    };
    for (const KeyRange& r : merge_ranges(request.read_conflicts)) {
      if (is_single_key(r)) {
        auto it = seen_.find(r.begin);
        if (it != seen_.end()) {
          pin_seen(it->first, it->second);  // unchanged, not deleted, not re-created
          continue;
        }
      }
      pb::Compare c;  // no key in the range modified (or created) after the read version
      c.set_key(engine_->to_etcd(r.begin));
      if (!is_single_key(r)) c.set_range_end(engine_->to_etcd(r.end));
      c.set_target(pb::Compare::MOD);
      c.set_result(pb::Compare::LESS);
      c.set_mod_revision(rv + 1);
      out.push_back(std::move(c));
      // Deletions leave no key to compare: pin every key the transaction saw in the range.
      for (auto it = seen_.lower_bound(r.begin); it != seen_.end() && it->first < r.end; ++it) {
        pin_seen(it->first, it->second);
      }
    }
    return out;
  }

  // Current value and mod_revision of each etcd key, in one read-only Txn.
  std::map<std::string, std::pair<std::optional<std::string>, std::int64_t>> read_current(
      const std::vector<std::string>& keys) {
    pb::TxnRequest txn;
    for (const std::string& key : keys) txn.add_success()->mutable_request_range()->set_key(key);
    pb::TxnResponse response;
    grpc::Status s;
    // Read-only Txns are safe to retry: use the read path's failover.
    s = engine_read_txn(txn, &response);
    if (!s.ok()) throw_rpc_error(s, "atomic read", /*commit=*/false);
    std::map<std::string, std::pair<std::optional<std::string>, std::int64_t>> out;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const pb::RangeResponse& rr = response.responses(static_cast<int>(i)).response_range();
      if (rr.kvs_size() > 0) {
        out[keys[i]] = {rr.kvs(0).value(), rr.kvs(0).mod_revision()};
      } else {
        out[keys[i]] = {std::nullopt, 0};
      }
    }
    return out;
  }

  grpc::Status engine_read_txn(const pb::TxnRequest& txn, pb::TxnResponse* response) {
    return engine_->read_rpc([&](Endpoint& ep, grpc::ClientContext& ctx) {
      response->Clear();
      return ep.kv->Txn(&ctx, txn, response);
    });
  }

  // put / delete_range ops for the collapsed writes: no key twice, no put inside a deleted range.
  std::vector<pb::RequestOp> write_ops(const Collapsed& c) {
    std::vector<pb::RequestOp> ops;
    auto in_cleared = [&](const std::string& key) {
      auto it = std::upper_bound(c.cleared.begin(), c.cleared.end(), key,
                                 [](const std::string& k, const KeyRange& r) { return k < r.begin; });
      if (it == c.cleared.begin()) return false;
      --it;
      return key < it->end;
    };
    for (const KeyRange& r : c.cleared) {
      std::string from = r.begin;
      for (auto it = c.final_values.lower_bound(r.begin);
           it != c.final_values.end() && it->first < r.end; ++it) {
        if (!it->second) continue;  // a delete inside the range: covered by it
        if (from < it->first) {
          pb::RequestOp op;
          op.mutable_request_delete_range()->set_key(engine_->to_etcd(from));
          op.mutable_request_delete_range()->set_range_end(engine_->to_etcd(it->first));
          ops.push_back(std::move(op));
        }
        from = key_after(it->first);
      }
      if (from < r.end) {
        pb::RequestOp op;
        op.mutable_request_delete_range()->set_key(engine_->to_etcd(from));
        op.mutable_request_delete_range()->set_range_end(engine_->to_etcd(r.end));
        ops.push_back(std::move(op));
      }
    }
    for (const auto& [key, value] : c.final_values) {
      pb::RequestOp op;
      if (value) {
        op.mutable_request_put()->set_key(engine_->to_etcd(key));
        op.mutable_request_put()->set_value(*value);
      } else {
        if (in_cleared(key)) continue;
        op.mutable_request_delete_range()->set_key(engine_->to_etcd(key));
      }
      ops.push_back(std::move(op));
    }
    return ops;
  }

  std::shared_ptr<EtcdEngineImpl> engine_;
  Version revision_ = -1;
  std::map<std::string, std::int64_t> seen_;  // key -> mod_revision as read
};

bool parse_int(std::string_view text, long long& out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

// ---------------------------------------------------------------------------------------------

EtcdOptions parse_etcd_url(std::string_view url) {
  auto bad = [&](const std::string& why) {
    return Error(ErrorCode::kConnectionStringInvalid,
                 "etcd URL '" + std::string(url) + "': " + why +
                     " (expected etcd://host:port[,host:port...][?option=value&...])");
  };
  constexpr std::string_view kScheme = "etcd://";
  if (url.substr(0, kScheme.size()) != kScheme) throw bad("must start with etcd://");
  std::string_view rest = url.substr(kScheme.size());
  std::string_view query;
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  EtcdOptions options;
  while (true) {
    std::size_t comma = rest.find(',');
    std::string_view ep = rest.substr(0, comma);
    std::size_t colon = ep.rfind(':');
    if (ep.empty() || colon == std::string_view::npos || colon == 0) {
      throw bad("endpoint '" + std::string(ep) + "' is not host:port");
    }
    std::string_view host = ep.substr(0, colon);
    long long port = 0;
    if (!parse_int(ep.substr(colon + 1), port) || port < 1 || port > 65535) {
      throw bad("bad port in '" + std::string(ep) + "'");
    }
    for (char ch : host) {
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_' ||
            ch == '[' || ch == ']' || ch == ':')) {
        throw bad("bad host in '" + std::string(ep) + "'");
      }
    }
    options.endpoints.emplace_back(ep);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  while (!query.empty()) {
    std::size_t amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) throw bad("option '" + std::string(item) + "' lacks '='");
    std::string_view name = item.substr(0, eq);
    std::string_view value = item.substr(eq + 1);
    long long n = 0;
    if (name == "prefix") {
      if (value.empty()) throw bad("prefix must not be empty");
      options.prefix = std::string(value);
    } else if (name == "timeout_ms" || name == "failover_ms" || name == "max_txn_ops") {
      if (!parse_int(value, n) || n <= 0 || n > 86'400'000) {
        throw bad("option " + std::string(name) + " needs a positive integer");
      }
      if (name == "timeout_ms") options.rpc_timeout = std::chrono::milliseconds(n);
      if (name == "failover_ms") options.failover_budget = std::chrono::milliseconds(n);
      if (name == "max_txn_ops") options.max_txn_ops = static_cast<int>(n);
    } else {
      throw bad("unknown option '" + std::string(name) + "'");
    }
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return options;
}

std::optional<MemberStatus> probe_member(const std::string& endpoint,
                                         std::chrono::milliseconds timeout) {
  auto channel = grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  auto stub = pb::Maintenance::NewStub(channel);
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout);
  pb::StatusRequest request;
  pb::StatusResponse response;
  if (!stub->Status(&ctx, request, &response).ok()) return std::nullopt;
  MemberStatus status;
  status.member_id = response.header().member_id();
  status.leader_id = response.leader();
  status.revision = response.header().revision();
  return status;
}

EtcdEngine::EtcdEngine(EtcdOptions options) {
  if (options.endpoints.empty()) {
    throw Error(ErrorCode::kConnectionStringInvalid, "etcd: no endpoint given");
  }
  if (options.prefix.empty()) {
    throw Error(ErrorCode::kConnectionStringInvalid, "etcd: key prefix must not be empty");
  }
  impl_ = std::make_shared<EtcdEngineImpl>(std::move(options));
  if (!impl_->any_endpoint_answers()) {
    std::string list;
    for (const std::string& ep : impl_->options().endpoints) list += (list.empty() ? "" : ",") + ep;
    throw Error(ErrorCode::kConnectionFailed, "etcd: no endpoint of " + list + " answers");
  }
}

EtcdEngine::~EtcdEngine() {
  if (impl_) impl_->stop_watches();
}

std::unique_ptr<Session> EtcdEngine::begin() { return std::make_unique<EtcdSession>(impl_); }

void EtcdEngine::watch(std::string key, std::optional<std::string> value_seen, Version version,
                       std::shared_ptr<detail::WatchState> state) {
  impl_->start_watch(std::move(key), std::move(value_seen), version, std::move(state));
}

std::uint64_t EtcdEngine::commit_batches() const { return impl_->batches(); }

const EtcdOptions& EtcdEngine::options() const { return impl_->options(); }

std::shared_ptr<Engine> open_etcd(std::string_view url) {
  return std::make_shared<EtcdEngine>(parse_etcd_url(url));
}

}  // namespace kvq::engine::etcd
