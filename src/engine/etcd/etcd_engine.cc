#include "engine/etcd/etcd_engine.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <cstring>
#include <random>
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
#include "engine/watch_state.h"
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
  // key -> operands to add, in order, to its committed value (written as delta records: no
  // read, no pin). Consecutive operands of one length are summed into one.
  std::map<std::string, std::vector<std::string>> deltas;
  bool needs_stamp = false;
};

// Collapses `mutations` (in order). `stamp`: the 10-byte versionstamp ("" = none yet;
// versionstamped ops are then only noted in needs_stamp).
Collapsed collapse(const std::vector<Mutation>& mutations, const std::string& stamp) {
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
  auto set = [&](const std::string& key, std::optional<std::string> value) {
    State& s = state_of(key);
    s.known = true;
    s.value = std::move(value);
    s.pending.clear();
  };
  Collapsed out;
  for (const Mutation& m : mutations) {
    switch (m.type) {
      case MutationType::kSet:
        set(m.param1, m.param2);
        break;
      case MutationType::kClear:
        set(m.param1, std::nullopt);
        break;
      case MutationType::kClearRange:
        if (m.param1 >= m.param2) break;
        keys.erase(keys.lower_bound(m.param1), keys.lower_bound(m.param2));
        cleared.push_back({m.param1, m.param2});
        break;
      case MutationType::kAddValue: {
        State& s = state_of(m.param1);
        if (s.known) {
          s.value = add_le(s.value, m.param2);
        } else {
          s.pending.push_back(m.param2);
        }
        break;
      }
      case MutationType::kSetVersionstampedKey:
        out.needs_stamp = true;
        if (!stamp.empty()) set(apply_stamp(m.param1, stamp), m.param2);
        break;
      case MutationType::kSetVersionstampedValue:
        out.needs_stamp = true;
        if (!stamp.empty()) set(m.param1, apply_stamp(m.param2, stamp));
        break;
    }
  }
  out.cleared = merge_ranges(std::move(cleared));
  for (auto& [key, s] : keys) {
    if (s.known) {
      out.final_values.emplace(key, std::move(s.value));
      continue;
    }
    // Adds on an unknown value: runs of equal-length operands summed (addition modulo 2^(8n)
    // commutes; a length change truncates or extends, so order matters between runs).
    std::vector<std::string>& runs = out.deltas[key];
    for (const std::string& operand : s.pending) {
      if (!runs.empty() && runs.back().size() == operand.size()) {
        runs.back() = add_le(runs.back(), operand);
      } else {
        runs.push_back(operand);
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Key layout in etcd. A kvq key k is stored at  prefix + enc(k), where enc escapes 0x00 as
// 0x00 0xff and appends the terminator 0x00 0x00 (order-preserving and prefix-free, as FDB's
// tuple byte strings). Atomic adds whose base value the transaction does not know are written
// blind as delta records  prefix + enc(k) + 16 random bytes  holding the operand; a read of k
// returns the base value plus, in commit order, the deltas newer than the base (a set writes a
// new base and so hides older deltas; a clear deletes the base and its deltas). So the base and
// deltas of k form one contiguous etcd range, and kvq range [b, e) is etcd range
// [prefix + enc(b), prefix + enc(e)). Deltas are folded into the base now and then.

std::string encode_key(std::string_view prefix, std::string_view key) {
  std::string out(prefix);
  out.reserve(prefix.size() + key.size() + 2);
  for (char c : key) {
    out.push_back(c);
    if (c == '\0') out.push_back('\xff');
  }
  out.push_back('\0');
  out.push_back('\0');
  return out;
}

// The end of k's group (base + deltas): enc(k) with its last byte 0x00 -> 0x01.
std::string group_end(std::string encoded) {
  encoded.back() = '\x01';
  return encoded;
}

struct DecodedKey {
  std::string key;
  bool delta = false;
};

// Inverse of encode_key (after the prefix); nullopt for etcd keys kvq did not write this way.
std::optional<DecodedKey> decode_key(std::string_view prefix, std::string_view etcd_key) {
  if (etcd_key.substr(0, prefix.size()) != prefix) return std::nullopt;
  std::string_view s = etcd_key.substr(prefix.size());
  DecodedKey out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\0') {
      out.key.push_back(s[i]);
      continue;
    }
    if (i + 1 >= s.size()) return std::nullopt;
    if (s[i + 1] == '\xff') {
      out.key.push_back('\0');
      ++i;
      continue;
    }
    if (s[i + 1] != '\0') return std::nullopt;
    std::size_t rest = s.size() - (i + 2);
    if (rest != 0 && rest != 16) return std::nullopt;
    out.delta = rest == 16;
    return out;
  }
  return std::nullopt;
}

// The base and delta records of one kvq key, as read.
struct Delta {
  std::string etcd_key;
  std::int64_t mod = 0;
  std::string operand;
};
struct Group {
  std::string key;
  std::optional<std::pair<std::string, std::int64_t>> base;  // value, mod_revision
  std::vector<Delta> deltas;

  // True if `d` counts: written after the base (a set hides older deltas).
  bool live(const Delta& d) const { return !base || d.mod > base->second; }

  // The kvq value: base, plus the live deltas in commit order.
  std::optional<std::string> value() const {
    std::optional<std::string> v;
    if (base) v = base->first;
    std::vector<const Delta*> in_order;
    for (const Delta& d : deltas) {
      if (live(d)) in_order.push_back(&d);
    }
    // Commit order; within one commit, the order of the ids (random prefix + sequence).
    std::sort(in_order.begin(), in_order.end(), [](const Delta* a, const Delta* b) {
      return a->mod != b->mod ? a->mod < b->mod : a->etcd_key < b->etcd_key;
    });
    for (const Delta* d : in_order) v = add_le(v, d->operand);
    return v;
  }
};

// Groups etcd key-values (ascending or descending) into kvq keys, in the order met.
std::vector<Group> group_kvs(std::string_view prefix,
                             const google::protobuf::RepeatedPtrField<mvccpb::KeyValue>& kvs) {
  std::vector<Group> out;
  for (const mvccpb::KeyValue& kv : kvs) {
    std::optional<DecodedKey> d = decode_key(prefix, kv.key());
    if (!d) continue;
    if (out.empty() || out.back().key != d->key) {
      out.push_back(Group{});
      out.back().key = d->key;
    }
    Group& g = out.back();
    if (d->delta) {
      g.deltas.push_back(Delta{kv.key(), kv.mod_revision(), kv.value()});
    } else {
      g.base.emplace(kv.value(), kv.mod_revision());
    }
  }
  return out;
}

std::string random_delta_id() {
  thread_local std::mt19937_64 gen(std::random_device{}() ^
                                   std::hash<std::thread::id>()(std::this_thread::get_id()));
  std::string out(16, '\0');
  std::uint64_t a = gen(), b = gen();
  std::memcpy(out.data(), &a, 8);
  std::memcpy(out.data() + 8, &b, 8);
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

  ~EtcdEngineImpl() {
    stop_watches();
    stop_compactor();
  }

  // Starts the MVCC-window compactor if options().mvcc_window > 0.
  void start_compactor() {
    if (opt_.mvcc_window.count() <= 0) return;
    compactor_ = std::thread([this] { run_compactor(); });
  }

  // Stops the compactor thread. Idempotent.
  void stop_compactor() {
    {
      std::lock_guard lock(compactor_mu_);
      compactor_stop_ = true;
    }
    compactor_cv_.notify_all();
    if (compactor_.joinable()) compactor_.join();
  }

  const EtcdOptions& options() const { return opt_; }
  // etcd key of kvq key `key`'s base record; also the etcd bound of a kvq range bound `key`.
  std::string to_etcd(std::string_view key) const { return encode_key(opt_.prefix, key); }
  // The versionstamp sequencer (not an encoded key, so no kvq range ever contains it).
  std::string sequencer_key() const { return opt_.prefix + "\xff\xff\xff\xff/versionstamp"; }
  // Written by commits that would otherwise change nothing, so every commit gets its own revision.
  std::string commit_marker_key() const { return opt_.prefix + "\xff\xff\xff\xff/commit"; }

  // Reads `key`'s group at the latest revision and, if it has at least `min_deltas` delta
  // records, replaces up to 100 of them by one delta holding their sum (stale ones, older than
  // the base, are just deleted), in one Txn pinning the base and every record folded, so it
  // fails harmlessly if any of them moved meanwhile. Best effort: never throws.
  void fold(const std::string& key, std::size_t min_deltas) {
    try {
      const std::string base_key = to_etcd(key);
      pb::RangeRequest rr;
      rr.set_key(base_key);
      rr.set_range_end(group_end(base_key));
      pb::RangeResponse resp = range(rr, "fold");
      std::vector<Group> groups = group_kvs(opt_.prefix, resp.kvs());
      if (groups.size() != 1 || groups[0].deltas.size() < min_deltas) return;
      const Group& g = groups[0];
      pb::TxnRequest txn;
      pb::Compare* c = txn.add_compare();  // base unchanged (or still absent)
      c->set_key(base_key);
      c->set_target(pb::Compare::MOD);
      c->set_result(pb::Compare::EQUAL);
      c->set_mod_revision(g.base ? g.base->second : 0);
      std::vector<const Delta*> live;
      std::optional<std::size_t> length;
      for (const Delta& d : g.deltas) {
        if (!g.live(d)) continue;
        // Mixed operand lengths do not commute: leave such keys alone.
        if (length && *length != d.operand.size()) return;
        length = d.operand.size();
      }
      const std::size_t n = std::min<std::size_t>(g.deltas.size(), 100);
      for (std::size_t i = 0; i < n; ++i) {
        const Delta& d = g.deltas[i];
        c = txn.add_compare();
        c->set_key(d.etcd_key);
        c->set_target(pb::Compare::MOD);
        c->set_result(pb::Compare::EQUAL);
        c->set_mod_revision(d.mod);
        txn.add_success()->mutable_request_delete_range()->set_key(d.etcd_key);
        if (g.live(d)) live.push_back(&d);
      }
      if (!live.empty()) {
        std::optional<std::string> sum;
        for (const Delta* d : live) sum = add_le(sum, d->operand);
        pb::PutRequest* put = txn.add_success()->mutable_request_put();
        put->set_key(base_key + random_delta_id());
        put->set_value(*sum);
      }
      grpc::ClientContext ctx;
      set_deadline(ctx, opt_.rpc_timeout);
      pb::TxnResponse out;
      std::size_t i = preferred_.load();
      endpoints_[i].kv->Txn(&ctx, txn, &out);  // failure just leaves the records for later
    } catch (const Error&) {
    }
  }

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

  // True if any endpoint answers a Status call within the RPC timeout (waiting for the channel
  // to connect, so a shared gRPC subchannel still in reconnect back-off does not count as down).
  bool any_endpoint_answers() {
    for (int round = 0; round < 2; ++round) {
      for (Endpoint& ep : endpoints_) {
        grpc::ClientContext ctx;
        set_deadline(ctx, round == 0 ? std::min(opt_.rpc_timeout, std::chrono::milliseconds(500))
                                     : opt_.rpc_timeout);
        ctx.set_wait_for_ready(true);
        pb::StatusRequest request;
        pb::StatusResponse response;
        if (ep.maintenance->Status(&ctx, request, &response).ok()) return true;
      }
    }
    return false;
  }

  // Every window/4: notes the current revision; compacts to the newest revision noted at least
  // one window ago.
  void run_compactor() {
    std::deque<std::pair<Clock::time_point, std::int64_t>> seen;
    std::int64_t compacted = 0;
    const auto period = std::max(opt_.mvcc_window / 4, std::chrono::milliseconds(5));
    std::unique_lock lock(compactor_mu_);
    while (!compactor_cv_.wait_for(lock, period, [&] { return compactor_stop_; })) {
      lock.unlock();
      try {
        pb::RangeRequest rr;
        rr.set_key(sequencer_key());
        rr.set_count_only(true);
        const std::int64_t rev = range(rr, "compactor").header().revision();
        const auto now = Clock::now();
        seen.emplace_back(now, rev);
        std::int64_t target = 0;
        while (!seen.empty() && now - seen.front().first >= opt_.mvcc_window) {
          target = seen.front().second;
          seen.pop_front();
        }
        if (target > compacted) {
          pb::CompactionRequest req;
          req.set_revision(target);
          pb::CompactionResponse resp;
          grpc::ClientContext ctx;
          set_deadline(ctx, opt_.rpc_timeout);
          grpc::Status s = endpoints_[preferred_.load()].kv->Compact(&ctx, req, &resp);
          // "already compacted" (by someone else, further) is fine too.
          if (s.ok() || s.error_message().find("compacted") != std::string::npos) {
            compacted = target;
          }
        }
      } catch (const Error&) {
        // Unreachable cluster: try again next period.
      }
      lock.lock();
    }
  }

  void count_batch() { batches_.fetch_add(1, std::memory_order_relaxed); }

  // The highest revision this process has seen committed or read.
  std::int64_t latest_seen() const { return latest_seen_.load(std::memory_order_acquire); }
  void saw(std::int64_t revision) {
    std::int64_t cur = latest_seen_.load(std::memory_order_relaxed);
    while (cur < revision && !latest_seen_.compare_exchange_weak(cur, revision)) {
    }
  }
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
  std::atomic<std::int64_t> latest_seen_{0};

  std::mutex compactor_mu_;
  std::condition_variable compactor_cv_;
  bool compactor_stop_ = false;
  std::thread compactor_;

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
  // The current kvq value of `key` (base plus deltas), at the latest revision.
  auto current_value = [&]() -> std::optional<std::string> {
    pb::RangeRequest rr;
    rr.set_key(etcd_key);
    rr.set_range_end(group_end(etcd_key));
    pb::RangeResponse resp = range(rr, "watch");
    std::vector<Group> groups = group_kvs(opt_.prefix, resp.kvs());
    if (groups.empty()) return std::nullopt;
    return groups[0].value();
  };
  try {
    std::size_t ep = preferred_.load() % endpoints_.size();
    auto stream = endpoints_[ep].watch->Watch(ctx.get());
    pb::WatchRequest request;
    auto* create = request.mutable_create_request();
    create->set_key(etcd_key);
    create->set_range_end(group_end(etcd_key));  // the base and its delta records
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
          if (current_value() != value_seen) {
            watch_fire(*state);
            break;
          }
          throw Error(ErrorCode::kTransactionTooOld,
                      "etcd watch: start revision compacted and value unchanged; re-arm");
        }
        throw Error(ErrorCode::kConnectionFailed,
                    "etcd watch: cancelled by server: " + response.cancel_reason());
      }
      if (response.events_size() > 0 && current_value() != value_seen) {
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
      read(request, "read version");
    }
    return revision_;
  }

  std::optional<std::string> get(std::string_view key) override {
    pb::RangeRequest request;
    const std::string base = engine_->to_etcd(key);
    request.set_key(base);
    request.set_range_end(group_end(base));
    pb::RangeResponse response = read(request, "get");
    std::vector<Group> groups = group_kvs(engine_->options().prefix, response.kvs());
    if (groups.empty()) return std::nullopt;
    if (groups[0].deltas.size() >= kFoldOnRead) engine_->fold(groups[0].key, kFoldOnRead);
    return groups[0].value();
  }

  std::vector<KeyValue> get_range(std::string_view begin, std::string_view end, int limit,
                                  bool reverse) override {
    if (begin >= end) {
      read_version();
      return {};
    }
    const std::string& prefix = engine_->options().prefix;
    std::string from = engine_->to_etcd(begin);
    std::string to = engine_->to_etcd(end);
    // Pages of etcd records until `limit` whole kvq keys (base + all deltas) are in hand: a key
    // is whole once a record of a later key (in scan order) has been seen or the range is done.
    google::protobuf::RepeatedPtrField<mvccpb::KeyValue> kvs;
    const int page = limit > 0 ? std::max(limit + 1, 16) : 0;
    for (;;) {
      pb::RangeRequest request;
      request.set_key(from);
      request.set_range_end(to);
      if (page > 0) request.set_limit(page);
      if (reverse) {
        request.set_sort_order(pb::RangeRequest::DESCEND);
        request.set_sort_target(pb::RangeRequest::KEY);
      }
      pb::RangeResponse response = read(request, "get_range");
      const bool more = response.more() && response.kvs_size() > 0;
      std::string last = response.kvs_size() > 0 ? response.kvs(response.kvs_size() - 1).key() : "";
      for (mvccpb::KeyValue& kv : *response.mutable_kvs()) kvs.Add(std::move(kv));
      if (!more) break;
      if (limit > 0) {
        int whole = 0;
        std::string previous;
        bool first = true;
        for (const mvccpb::KeyValue& kv : kvs) {
          std::optional<DecodedKey> d = decode_key(prefix, kv.key());
          if (!d) continue;
          if (first || d->key != previous) ++whole;
          previous = d->key;
          first = false;
        }
        if (whole > limit) break;  // limit whole keys plus the start of another
      }
      if (reverse) {
        to = last;
      } else {
        from = key_after(last);
      }
    }
    std::vector<Group> groups = group_kvs(prefix, kvs);
    std::vector<KeyValue> out;
    for (const Group& g : groups) {
      std::optional<std::string> value = g.value();
      if (!value) continue;
      if (g.deltas.size() >= kFoldOnRead) engine_->fold(g.key, kFoldOnRead);
      out.push_back(KeyValue{g.key, std::move(*value)});
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
    const Collapsed first = collapse(request.mutations, "");
    const std::string seq_key = engine_->sequencer_key();
    // Versionstamps: a sequencer key read now, pinned by a compare and bumped by the commit.
    std::optional<std::string> seq_value;
    std::int64_t seq_mod = 0;
    std::int64_t seq_floor = 0;  // stamps are above the revision seen when taking them
    if (first.needs_stamp) {
      pb::RangeRequest rr;
      rr.set_key(seq_key);
      pb::RangeResponse resp = engine_->range(rr, "versionstamp");
      seq_floor = resp.header().revision();
      if (resp.kvs_size() > 0) {
        seq_value = resp.kvs(0).value();
        seq_mod = resp.kvs(0).mod_revision();
      }
    }
    for (int attempt = 0;; ++attempt) {
      std::string stamp;
      std::uint64_t sequence = 0;
      if (first.needs_stamp) {
        sequence = std::max<std::uint64_t>((seq_value ? from_be64(*seq_value) : 0) + 1,
                                           static_cast<std::uint64_t>(seq_floor) + 1);
        stamp = be64(sequence) + std::string(2, '\0');
      }
      const Collapsed done = first.needs_stamp ? collapse(request.mutations, stamp) : first;
      std::vector<pb::RequestOp> ops = write_ops(done);
      if (first.needs_stamp) {
        pb::RequestOp op;
        op.mutable_request_put()->set_key(seq_key);
        op.mutable_request_put()->set_value(be64(sequence));
        ops.push_back(std::move(op));
      }
      // etcd does not advance the revision for a Txn that changes nothing (e.g. only deletes of
      // absent keys), so two such commits would share a version. A put always advances it; a put
      // to this key outside every kvq range reads nothing and conflicts with nothing.
      const bool has_put = std::any_of(ops.begin(), ops.end(), [](const pb::RequestOp& op) {
        return op.has_request_put();
      });
      if (!ops.empty() && !has_put) {
        pb::RequestOp op;
        op.mutable_request_put()->set_key(engine_->commit_marker_key());
        ops.push_back(std::move(op));
      }
      if (static_cast<int>(ops.size()) > max_ops) {
        throw Error(ErrorCode::kTransactionTooLarge,
                    "etcd: the transaction's writes need " + std::to_string(ops.size()) +
                        " operations (one per key, clear ranges split around later sets), more "
                        "than etcd's --max-txn-ops (" + std::to_string(max_ops) + ")");
      }

      pb::TxnRequest txn;
      for (const pb::Compare& c : conflicts) *txn.add_compare() = c;
      if (!conflicts.empty()) {
        // If the compares fail and the read version was compacted meanwhile, etcd answers this
        // Range with "required revision has been compacted": transaction_too_old, as FDB.
        pb::RangeRequest* probe = txn.add_failure()->mutable_request_range();
        probe->set_key(seq_key);
        probe->set_revision(request.read_version);
        probe->set_count_only(true);
      }
      if (!first.needs_stamp) {
        for (pb::RequestOp& op : ops) *txn.add_success() = std::move(op);
      } else {
        // Nested: if only the sequencer moved, the inner Txn fails and returns its new value.
        pb::TxnRequest* inner = txn.add_success()->mutable_request_txn();
        pb::Compare* c = inner->add_compare();
        c->set_key(seq_key);
        c->set_target(pb::Compare::MOD);
        c->set_result(pb::Compare::EQUAL);
        c->set_mod_revision(seq_mod);
        inner->add_failure()->mutable_request_range()->set_key(seq_key);
        for (pb::RequestOp& op : ops) *inner->add_success() = std::move(op);
      }

      pb::TxnResponse response = engine_->commit_rpc(txn);
      if (!response.succeeded()) {
        throw Error(ErrorCode::kNotCommitted,
                    "etcd: a key this transaction read was written after its read version");
      }
      if (first.needs_stamp) {
        const pb::TxnResponse& inner = response.responses(0).response_txn();
        if (!inner.succeeded()) {
          if (attempt >= 1000) {
            throw Error(ErrorCode::kNotCommitted, "etcd: versionstamp sequencer kept moving");
          }
          const pb::RangeResponse& rr = inner.responses(0).response_range();
          seq_floor = rr.header().revision();
          seq_value.reset();
          seq_mod = 0;
          if (rr.kvs_size() > 0) {
            seq_value = rr.kvs(0).value();
            seq_mod = rr.kvs(0).mod_revision();
          }
          continue;
        }
      }
      engine_->count_batch();
      engine_->saw(response.header().revision());
      // Keep delta records few: now and then fold a key this commit added to.
      for (const auto& [key, runs] : done.deltas) {
        if (fold_dice()) engine_->fold(key, kFoldOnCommit);
      }
      CommitResult result;
      result.version = response.header().revision();
      result.versionstamp =
          first.needs_stamp ? stamp
                            : be64(static_cast<std::uint64_t>(result.version)) + std::string(2, '\0');
      return result;
    }
  }

 private:
  // A read folds a key with this many delta records; a commit that added to a key folds it (if
  // it has kFoldOnCommit records) with probability 1/64, so fold Txns stay rare.
  static constexpr std::size_t kFoldOnRead = 32;
  static constexpr std::size_t kFoldOnCommit = 16;

  static bool fold_dice() {
    thread_local std::mt19937 gen(std::random_device{}());
    return gen() % 64 == 0;
  }

  // A read at this session's revision (the first read fixes the revision). Records every etcd
  // record seen, for the deletion compares at commit.
  pb::RangeResponse read(pb::RangeRequest& request, std::string_view what) {
    if (revision_ >= 0) {
      request.set_revision(revision_);
      request.set_serializable(true);
    } else if (engine_->options().fast_first_read) {
      request.set_serializable(true);
    }
    pb::RangeResponse response = engine_->range(request, what);
    if (revision_ < 0 && request.serializable() &&
        response.header().revision() < engine_->latest_seen()) {
      // The member answered from behind what this process already saw: ask the leader.
      request.set_serializable(false);
      response = engine_->range(request, what);
    }
    if (revision_ < 0) {
      revision_ = response.header().revision();
      engine_->saw(revision_);
    }
    for (const mvccpb::KeyValue& kv : response.kvs()) seen_[kv.key()] = kv.mod_revision();
    return response;
  }

  // Compares plus Txn operations a commit of these reads and writes would send (the sequencer put
  // and the compaction probe counted as one each), to compare with --max-txn-ops.
  std::size_t operations(const std::vector<KeyRange>& read_conflicts,
                         const std::vector<Mutation>& mutations) override {
    CommitRequest request;
    request.read_version = revision_;
    request.read_conflicts = read_conflicts;
    const std::size_t compares = conflict_compares(request).size();
    const Collapsed collapsed = collapse(mutations, "");
    return compares + write_ops(collapsed).size() + 2;
  }

  // The compares that fail iff a read-conflict range was written after the read version.
  std::vector<pb::Compare> conflict_compares(const CommitRequest& request) {
    std::vector<pb::Compare> out;
    if (request.read_version < 0 || request.read_conflicts.empty()) return out;
    const Version rv = request.read_version;
    for (const KeyRange& r : merge_ranges(request.read_conflicts)) {
      const std::string from = engine_->to_etcd(r.begin);
      const std::string to = engine_->to_etcd(r.end);
      pb::Compare c;  // no record in the range modified (or created) after the read version
      c.set_key(from);
      c.set_range_end(to);
      c.set_target(pb::Compare::MOD);
      c.set_result(pb::Compare::LESS);
      c.set_mod_revision(rv + 1);
      out.push_back(std::move(c));
      // Deletions leave nothing to compare: pin every record the transaction saw in the range.
      for (auto it = seen_.lower_bound(from); it != seen_.end() && it->first < to; ++it) {
        pb::Compare pin;
        pin.set_key(it->first);
        pin.set_target(pb::Compare::MOD);
        pin.set_result(pb::Compare::EQUAL);
        pin.set_mod_revision(it->second);
        out.push_back(std::move(pin));
      }
    }
    return out;
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
    auto delete_range = [&](std::string from, std::string to) {
      if (from >= to) return;
      pb::RequestOp op;
      op.mutable_request_delete_range()->set_key(std::move(from));
      op.mutable_request_delete_range()->set_range_end(std::move(to));
      ops.push_back(std::move(op));
    };
    for (const KeyRange& r : c.cleared) {
      std::string from = engine_->to_etcd(r.begin);
      for (auto it = c.final_values.lower_bound(r.begin);
           it != c.final_values.end() && it->first < r.end; ++it) {
        if (!it->second) continue;  // a delete inside the range: covered by it
        const std::string base = engine_->to_etcd(it->first);
        delete_range(from, base);
        from = base + std::string(1, '\0');  // the key's old deltas still go
      }
      delete_range(from, engine_->to_etcd(r.end));
    }
    for (const auto& [key, value] : c.final_values) {
      const std::string base = engine_->to_etcd(key);
      if (value) {
        // A new base hides the key's older delta records.
        pb::RequestOp op;
        op.mutable_request_put()->set_key(base);
        op.mutable_request_put()->set_value(*value);
        ops.push_back(std::move(op));
      } else if (!in_cleared(key)) {
        delete_range(base, group_end(base));
      }
    }
    // Delta ids: one random 8-byte prefix per commit + a big-endian sequence number, so the
    // deltas one commit writes for a key sort in the order they must be applied.
    const std::string id_prefix = random_delta_id().substr(0, 8);
    std::uint64_t seq = 0;
    for (const auto& [key, operands] : c.deltas) {
      for (const std::string& operand : operands) {
        pb::RequestOp op;
        op.mutable_request_put()->set_key(engine_->to_etcd(key) + id_prefix + be64(seq++));
        op.mutable_request_put()->set_value(operand);
        ops.push_back(std::move(op));
      }
    }
    return ops;
  }

  std::shared_ptr<EtcdEngineImpl> engine_;
  Version revision_ = -1;
  std::map<std::string, std::int64_t> seen_;  // etcd key -> mod_revision as read
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
    } else if (name == "fast_first_read") {
      if (value != "0" && value != "1") throw bad("fast_first_read must be 0 or 1");
      options.fast_first_read = value == "1";
    } else if (name == "timeout_ms" || name == "failover_ms" || name == "max_txn_ops" ||
               name == "mvcc_window_ms") {
      if (!parse_int(value, n) || n <= 0 || n > 86'400'000) {
        throw bad("option " + std::string(name) + " needs a positive integer");
      }
      if (name == "timeout_ms") options.rpc_timeout = std::chrono::milliseconds(n);
      if (name == "failover_ms") options.failover_budget = std::chrono::milliseconds(n);
      if (name == "max_txn_ops") options.max_txn_ops = static_cast<int>(n);
      if (name == "mvcc_window_ms") options.mvcc_window = std::chrono::milliseconds(n);
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
  impl_->start_compactor();
}

EtcdEngine::~EtcdEngine() {
  if (impl_) {
    impl_->stop_watches();
    impl_->stop_compactor();
  }
}

std::unique_ptr<Session> EtcdEngine::begin() { return std::make_unique<EtcdSession>(impl_); }

void EtcdEngine::watch(std::string key, std::optional<std::string> value_seen, Version version,
                       std::shared_ptr<detail::WatchState> state) {
  impl_->start_watch(std::move(key), std::move(value_seen), version, std::move(state));
}

std::uint64_t EtcdEngine::commit_batches() const { return impl_->batches(); }

const EtcdOptions& EtcdEngine::options() const { return impl_->options(); }

TransactionLimits EtcdEngine::limits() const {
  TransactionLimits limits;
  limits.max_operations = static_cast<std::size_t>(impl_->options().max_txn_ops);
  return limits;
}

std::shared_ptr<Engine> open_etcd(std::string_view url) {
  return std::make_shared<EtcdEngine>(parse_etcd_url(url));
}

}  // namespace kvq::engine::etcd

namespace kvq::engine {

std::shared_ptr<Engine> open_etcd(const std::string& body,
                                  const std::map<std::string, std::string>& query) {
  // kvq::open passes the endpoints with or without the URL's leading "//".
  std::string url = body.rfind("//", 0) == 0 ? "etcd:" + body : "etcd://" + body;
  char sep = '?';
  for (const auto& [key, value] : query) {
    url += sep + key + "=" + value;
    sep = '&';
  }
  return etcd::open_etcd(url);
}

}  // namespace kvq::engine
