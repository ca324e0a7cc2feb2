#include "layers/item_store.h"

#include <algorithm>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kvq/error.h"
#include "kvq/tuple.h"

namespace kvq::detail {
namespace {

constexpr char kWaiting = '\x00';
constexpr char kDelivered = '\x01';
constexpr char kEmpty = '\x02';
constexpr char kBaton = '\x03';
constexpr std::size_t kRandomSize = 20;  // as the recipes' os.urandom(20)

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t decode_le64(std::string_view v) {
  std::uint64_t x = 0;
  for (std::size_t i = 0; i < 8 && i < v.size(); ++i) {
    x |= static_cast<std::uint64_t>(static_cast<unsigned char>(v[i])) << (8 * i);
  }
  return static_cast<std::int64_t>(x);
}

std::mt19937_64& rng() {
  thread_local std::mt19937_64 gen([] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(),
                      static_cast<unsigned>(std::hash<std::thread::id>()(std::this_thread::get_id()))};
    return std::mt19937_64(seq);
  }());
  return gen;
}

bool is_waiting(const std::optional<std::string>& slot) {
  return slot && !slot->empty() && ((*slot)[0] == kWaiting || (*slot)[0] == kBaton);
}

std::atomic<std::uint64_t> next_store_id{1};

// The marker of the last push each thread made through each store: cleared by that thread's next
// push through the same store, so live clients keep one marker each.
std::unordered_map<std::uint64_t, std::string>& last_markers() {
  thread_local std::unordered_map<std::uint64_t, std::string> markers;
  return markers;
}

}  // namespace

std::string random_bytes(std::size_t n) {
  std::string out(n, '\0');
  auto& gen = rng();
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t x = gen();
    for (std::size_t j = 0; j < 8 && i + j < n; ++j) out[i + j] = static_cast<char>(x >> (8 * j));
  }
  return out;
}

struct ItemStore::Request {
  std::string key;
  std::string id;
  Side side;
};

struct ItemStore::BatchResult {
  enum Kind { kNoRequests, kServedOthers, kMineServed, kNotLeader } kind = kNoRequests;
};

ItemStore::ItemStore(std::shared_ptr<Database> db, Subspace subspace, ItemStoreOptions options,
                     bool prioritized)
    : db_(std::move(db)),
      subspace_(std::move(subspace)),
      control_(subspace_.subspace(Tuple().append("kvq"))),
      options_(options),
      prioritized_(prioritized),
      store_id_(next_store_id.fetch_add(1)) {
  if (!db_) throw Error(ErrorCode::kInvalidArgument, "queue: null database");
  if (options_.contention.batch_size < 1) {
    throw Error(ErrorCode::kInvalidOptionValue, "queue: contention.batch_size must be >= 1");
  }
  if (options_.contention.lease.count() < 1 || options_.pop_timeout.count() < 0 ||
      options_.marker_ttl.count() < 1) {
    throw Error(ErrorCode::kInvalidOptionValue,
                "queue: lease and marker_ttl must be > 0, pop_timeout >= 0");
  }
  // Integer tuple elements have type codes 0x0c..0x1c; control keys start with a string (0x02).
  items_begin_ = subspace_.key() + '\x0c';
  items_end_ = subspace_.key() + '\x1d';
  size_key_ = control_.pack(Tuple().append("size"));
  lease_key_ = control_.pack(Tuple().append("lease"));
  KeyRange reqs = control_.range(Tuple().append("req"));
  req_begin_ = reqs.begin;
  req_end_ = reqs.end;
  marker_prefix_ = control_.pack(Tuple().append("mark"));
}

std::string ItemStore::slot_key(std::string_view id) const {
  return control_.pack(Tuple().append("slot").append(Bytes(id)));
}
std::string ItemStore::res_key(std::string_view id) const {
  return control_.pack(Tuple().append("res").append(Bytes(id)));
}
std::string ItemStore::req_key(std::string_view versionstamp10) const {
  return control_.pack(Tuple().append("req").append(Versionstamp::complete(versionstamp10)));
}

// ---- push ----------------------------------------------------------------------------------

std::string ItemStore::item_key(Transaction& tr, std::int64_t priority, const std::string& random) {
  if (!prioritized_) {
    // The recipe's last_index: a snapshot read of the last item, so pushes never conflict.
    auto last = tr.get_range(items_begin_, items_end_, {.limit = 1, .reverse = true, .snapshot = true});
    std::int64_t index = last.empty() ? 0 : subspace_.unpack(last[0].key).get_int(0);
    if (index == INT64_MAX) throw Error(ErrorCode::kInternalError, "queue: index overflow");
    return subspace_.pack(Tuple().append(index + 1).append(Bytes(random)));
  }
  KeyRange r = subspace_.range(Tuple().append(priority));
  auto last = tr.get_range(r.begin, r.end, {.limit = 1, .reverse = true, .snapshot = true});
  std::int64_t count = last.empty() ? 0 : subspace_.unpack(last[0].key).get_int(1) + 1;
  return subspace_.pack(Tuple().append(priority).append(count).append(Bytes(random)));
}

void ItemStore::push(Transaction& tr, std::string_view value, std::int64_t priority,
                     const std::string& random) {
  if (value.size() > kMaxValueSize) {
    throw Error(ErrorCode::kValueTooLarge, "queue: value larger than 100,000 bytes");
  }
  tr.set(item_key(tr, priority, random), value);
  tr.atomic_add(size_key_, std::int64_t{1});
}

std::string ItemStore::new_marker() const {
  return control_.pack(
      Tuple().append("mark").append(now_ms()).append(Bytes(random_bytes(kRandomSize))));
}

// Writes `marker` in `tr`, clears this thread's previous marker of this store, and now and then
// sweeps markers older than marker_ttl (left by clients that went away).
void ItemStore::write_marker(Transaction& tr, const std::string& marker) {
  tr.set(marker, "");
  const std::string& previous = last_markers()[store_id_];
  if (!previous.empty()) tr.clear(previous);
  if (rng()() % 64 == 0) {
    tr.clear_range(marker_prefix_ + '\x00',
                   control_.pack(Tuple().append("mark").append(
                       now_ms() - static_cast<std::int64_t>(options_.marker_ttl.count()))));
  }
}

void ItemStore::remember_marker(const std::string& marker) { last_markers()[store_id_] = marker; }

template <typename F>
auto ItemStore::run_once(F&& body, const TransactionOptions& topts)
    -> decltype(body(std::declval<Transaction&>())) {
  using R = decltype(body(std::declval<Transaction&>()));
  const std::string marker = new_marker();
  Transaction tr = db_->create_transaction(topts);
  bool maybe_done = false;
  std::optional<R> attempt, maybe_result;
  for (;;) {
    try {
      if (maybe_done && tr.get(marker)) break;  // that attempt did commit
      attempt.reset();
      attempt.emplace(body(tr));
      write_marker(tr, marker);
      tr.commit();
      remember_marker(marker);
      return std::move(*attempt);
    } catch (const Error& e) {
      if (e.maybe_committed() && attempt) {
        maybe_done = true;
        maybe_result = std::move(attempt);
      }
      tr.on_error(e);
    }
  }
  remember_marker(marker);
  return std::move(*maybe_result);
}

void ItemStore::push(std::string_view value, std::int64_t priority) {
  // Identity chosen outside the retry loop: the item's random part and the marker key.
  const std::string random = random_bytes(kRandomSize);
  run_once([&](Transaction& tr) {
    push(tr, value, priority, random);
    return 0;
  });
}

// ---- plain pops ----------------------------------------------------------------------------

std::optional<KeyValue> ItemStore::end_item(Transaction& tr, Side side, bool snapshot) {
  auto kvs = tr.get_range(items_begin_, items_end_,
                          {.limit = 1, .reverse = side == Side::kBack, .snapshot = snapshot});
  if (kvs.empty()) return std::nullopt;
  return std::move(kvs[0]);
}

std::optional<std::string> ItemStore::pop_plain(Transaction& tr, Side side) {
  auto kv = end_item(tr, side, false);
  if (!kv) return std::nullopt;
  tr.clear(kv->key);
  tr.atomic_add(size_key_, std::int64_t{-1});
  return std::move(kv->value);
}

std::optional<std::string> ItemStore::peek(Transaction& tr, Side side) {
  auto kv = end_item(tr, side, false);
  if (!kv) return std::nullopt;
  return std::move(kv->value);
}

std::int64_t ItemStore::size(Transaction& tr) {
  auto v = tr.get(size_key_);
  return v ? decode_le64(*v) : 0;
}

void ItemStore::clear(Transaction& tr) {
  tr.clear_range(items_begin_, items_end_);
  if (options_.high_contention) serve_all(tr);  // waiting pops get "empty"
  tr.set(size_key_, std::string(8, '\0'));
}

std::optional<std::string> ItemStore::pop(Transaction& tr, Side side) {
  if (options_.high_contention) serve_all(tr);
  return pop_plain(tr, side);
}

std::optional<std::string> ItemStore::pop(Side side, std::chrono::milliseconds timeout) {
  if (options_.high_contention) return pop_staged(side, timeout);
  TransactionOptions topts;
  topts.timeout = timeout;
  try {
    return run_once([&](Transaction& tr) { return pop_plain(tr, side); }, topts);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kTransactionTimedOut) {
      throw Error(ErrorCode::kTimedOut, "queue: pop timed out");
    }
    throw;
  }
}

// ---- high-contention pops -------------------------------------------------------------------

// One attempt at the plain pop, unless pops are already waiting (then a new pop must queue up
// behind them). Sets *staged when the caller has to register a request.
std::optional<std::string> ItemStore::pop_fast(Side side, bool* staged) {
  *staged = true;
  const std::string marker = new_marker();
  Transaction tr = db_->create_transaction();
  std::optional<std::string> v;
  try {
    auto waiting = tr.get_range(req_begin_, req_end_, {.limit = 1});
    if (!waiting.empty()) return std::nullopt;
    v = pop_plain(tr, side);
    write_marker(tr, marker);
    tr.commit();
    remember_marker(marker);
    *staged = false;
    return v;
  } catch (const Error& e) {
    if (!e.retryable()) throw;
    if (!e.maybe_committed()) return std::nullopt;
  }
  // commit_unknown_result: the marker tells whether the pop happened.
  bool committed = db_->run([&](Transaction& check) { return check.get(marker).has_value(); });
  if (committed) {
    remember_marker(marker);
    *staged = false;
    return v;
  }
  return std::nullopt;
}

std::string ItemStore::register_request(Side side) {
  const std::string id = random_bytes(kRandomSize);
  const std::string slot = slot_key(id);
  const std::string req =
      control_.pack_with_versionstamp(Tuple().append("req").append(Versionstamp::incomplete()));
  const std::string value = Tuple().append(Bytes(id)).append(static_cast<std::int64_t>(side)).pack();
  // Slot: \x00 + the 10-byte versionstamp of the request (offset 1).
  std::string slot_value(1, kWaiting);
  slot_value.append(10, '\0');
  slot_value.append("\x01\x00\x00\x00", 4);
  Transaction tr = db_->create_transaction();
  bool maybe_done = false;
  for (;;) {
    try {
      if (maybe_done && tr.get(slot)) return id;
      tr.set_versionstamped_key(req, value);
      tr.set_versionstamped_value(slot, slot_value);
      tr.commit();
      return id;
    } catch (const Error& e) {
      if (e.maybe_committed()) maybe_done = true;
      tr.on_error(e);
    }
  }
}

// Serves up to batch_size waiting requests, oldest first, inside `tr`. With `me` (a waiting
// popper's id) the batch runs under the fulfiller lease: it only proceeds if the lease is free,
// expired, ours, or handed to us (baton), renews it, and hands it on once our own request is
// served. Without `me` (composed pops, clear) the lease is ignored.
ItemStore::BatchResult ItemStore::fulfil_batch(Transaction& tr, const std::string* me) {
  BatchResult result;
  const std::int64_t now = now_ms();
  const auto& hc = options_.contention;
  if (me) {
    auto mine = tr.get(slot_key(*me));
    if (!is_waiting(mine)) {
      result.kind = BatchResult::kMineServed;
      return result;
    }
    auto lease = tr.get(lease_key_);
    bool ok = !lease || (*mine)[0] == kBaton;
    if (!ok) {
      Tuple l = Tuple::unpack(*lease);
      ok = l.get_bytes(0).data == *me || l.get_int(1) < now;
    }
    if (!ok) {
      result.kind = BatchResult::kNotLeader;
      return result;
    }
  }
  auto raw = tr.get_range(req_begin_, req_end_, {.limit = hc.batch_size + 1});
  if (raw.empty()) {
    if (me) tr.clear(lease_key_);
    result.kind = BatchResult::kNoRequests;
    return result;
  }
  std::vector<Request> reqs;
  reqs.reserve(raw.size());
  int n_front = 0, n_back = 0;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    Tuple v = Tuple::unpack(raw[i].value);
    Request r{raw[i].key, v.get_bytes(0).data, static_cast<Side>(v.get_int(1))};
    if (i < static_cast<std::size_t>(hc.batch_size)) (r.side == Side::kFront ? n_front : n_back)++;
    reqs.push_back(std::move(r));
  }
  const std::size_t n = std::min<std::size_t>(reqs.size(), hc.batch_size);
  std::vector<KeyValue> front, back;
  if (n_front > 0) front = tr.get_range(items_begin_, items_end_, {.limit = n_front});
  if (n_back > 0) back = tr.get_range(items_begin_, items_end_, {.limit = n_back, .reverse = true});
  std::set<std::string> used;
  std::size_t fi = 0, bi = 0;
  std::int64_t taken = 0;
  bool mine_served = false;
  for (std::size_t i = 0; i < n; ++i) {
    const Request& r = reqs[i];
    const std::string slot = slot_key(r.id);
    tr.clear(r.key);
    if (!is_waiting(tr.get(slot))) continue;  // stale request (cannot happen; defensive)
    std::vector<KeyValue>& list = r.side == Side::kFront ? front : back;
    std::size_t& idx = r.side == Side::kFront ? fi : bi;
    while (idx < list.size() && used.count(list[idx].key)) ++idx;
    if (idx < list.size()) {
      const KeyValue& item = list[idx++];
      used.insert(item.key);
      tr.clear(item.key);
      tr.set(res_key(r.id), item.value);
      tr.set(slot, std::string(1, kDelivered));
      ++taken;
    } else {
      tr.set(slot, std::string(1, kEmpty));
    }
    if (me && r.id == *me) mine_served = true;
  }
  if (taken > 0) tr.atomic_add(size_key_, -taken);
  if (me) {
    if (mine_served) {
      // Hand the lease to the oldest request still waiting, and wake it through its slot.
      bool handed = false;
      if (reqs.size() > n) {
        const Request& next = reqs[n];
        auto nslot = tr.get(slot_key(next.id));
        if (is_waiting(nslot) && nslot->size() == 11) {
          tr.set(lease_key_, Tuple().append(Bytes(next.id)).append(now + hc.lease.count()).pack());
          tr.set(slot_key(next.id), std::string(1, kBaton) + nslot->substr(1));
          handed = true;
        }
      }
      if (!handed) tr.clear(lease_key_);
      result.kind = BatchResult::kMineServed;
    } else {
      tr.set(lease_key_, Tuple().append(Bytes(*me)).append(now + hc.lease.count()).pack());
      result.kind = BatchResult::kServedOthers;
    }
  } else {
    result.kind = BatchResult::kServedOthers;
  }
  return result;
}

void ItemStore::serve_all(Transaction& tr) {
  bool served = false;
  while (fulfil_batch(tr, nullptr).kind != BatchResult::kNoRequests) served = true;
  if (served) tr.clear(lease_key_);
}

// Passes the lease on from `me` (giving up) to the oldest other waiting request, or frees it.
void ItemStore::pass_baton(Transaction& tr, const std::string& me, std::int64_t now) {
  auto reqs = tr.get_range(req_begin_, req_end_, {.limit = 2});
  for (const auto& kv : reqs) {
    Tuple v = Tuple::unpack(kv.value);
    std::string id = v.get_bytes(0).data;
    if (id == me) continue;
    auto nslot = tr.get(slot_key(id));
    if (is_waiting(nslot) && nslot->size() == 11) {
      tr.set(lease_key_,
             Tuple().append(Bytes(id)).append(now + options_.contention.lease.count()).pack());
      tr.set(slot_key(id), std::string(1, kBaton) + nslot->substr(1));
      return;
    }
    break;
  }
  tr.clear(lease_key_);
}

// A popper giving up: in one transaction either takes the result already delivered to it, or
// removes its request (so no item can be delivered to it later). Returns the delivered value and
// sets *delivered, or returns nullopt with *delivered false (request withdrawn).
std::optional<std::string> ItemStore::cancel_request(const std::string& me, bool* delivered) {
  const std::string slot = slot_key(me);
  const std::string res = res_key(me);
  Transaction tr = db_->create_transaction();
  std::optional<std::string> seen;  // what a maybe-committed attempt took
  bool seen_delivered = false, maybe_done = false;
  for (;;) {
    try {
      auto s = tr.get(slot);
      if (!s || s->empty()) {
        if (!maybe_done) throw Error(ErrorCode::kInternalError, "queue: pop request vanished");
        *delivered = seen_delivered;
        return seen;
      }
      seen.reset();
      seen_delivered = false;
      if ((*s)[0] == kDelivered) {
        seen = tr.get(res);
        if (!seen) throw Error(ErrorCode::kInternalError, "queue: delivered result missing");
        seen_delivered = true;
        tr.clear(res);
      } else if ((*s)[0] == kEmpty) {
        seen_delivered = true;  // nullopt is a real answer: the queue was empty
      } else {
        if (s->size() != 11) throw Error(ErrorCode::kCorruption, "queue: bad pop slot");
        tr.clear(req_key(s->substr(1)));
        auto lease = tr.get(lease_key_);
        if ((*s)[0] == kBaton ||
            (lease && Tuple::unpack(*lease).get_bytes(0).data == me)) {
          pass_baton(tr, me, now_ms());
        }
      }
      tr.clear(slot);
      tr.commit();
      *delivered = seen_delivered;
      return seen;
    } catch (const Error& e) {
      if (e.maybe_committed()) maybe_done = true;
      tr.on_error(e);
    }
  }
}

std::optional<std::string> ItemStore::pop_staged(Side side, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto deadline =
      timeout.count() > 0 ? Clock::now() + timeout : Clock::time_point::max();
  bool staged = false;
  auto fast = pop_fast(side, &staged);
  if (!staged) return fast;
  const std::string me = register_request(side);
  const std::string slot = slot_key(me);
  const std::string res = res_key(me);
  std::optional<std::string> taken;  // value read by a consume attempt that may have committed
  bool maybe_consumed = false;
  for (;;) {
    Transaction tr = db_->create_transaction();
    try {
      auto s = tr.get(slot);
      if (!s || s->empty()) {
        if (maybe_consumed) return taken;
        throw Error(ErrorCode::kInternalError, "queue: pop request vanished");
      }
      if ((*s)[0] == kDelivered || (*s)[0] == kEmpty) {
        taken.reset();
        if ((*s)[0] == kDelivered) {
          taken = tr.get(res);
          if (!taken) throw Error(ErrorCode::kInternalError, "queue: delivered result missing");
          tr.clear(res);
        }
        tr.clear(slot);
        try {
          tr.commit();
        } catch (const Error& e) {
          if (e.maybe_committed()) maybe_consumed = true;
          throw;
        }
        return taken;
      }
      if (Clock::now() >= deadline) {
        bool delivered = false;
        auto v = cancel_request(me, &delivered);
        if (delivered) return v;
        throw Error(ErrorCode::kTimedOut, "queue: pop timed out (request withdrawn)");
      }
      auto lease = tr.get(lease_key_, /*snapshot=*/true);
      std::int64_t lease_left_ms = 0;
      bool lead = (*s)[0] == kBaton || !lease;
      if (lease) {
        Tuple l = Tuple::unpack(*lease);
        lease_left_ms = l.get_int(1) - now_ms();
        lead = lead || l.get_bytes(0).data == me || lease_left_ms < 0;
      }
      if (lead) {
        // Fulfil batches until our own request is served or another popper holds the lease.
        for (;;) {
          if (Clock::now() >= deadline) break;
          Transaction ftr = db_->create_transaction();
          BatchResult r;
          try {
            r = fulfil_batch(ftr, &me);
            ftr.commit();
          } catch (const Error& e) {
            if (!e.retryable()) throw;
            if (e.maybe_committed()) break;  // re-read our slot from scratch
            ftr.on_error(e);
            continue;
          }
          if (r.kind != BatchResult::kServedOthers) break;
        }
        continue;
      }
      Watch w = tr.watch(slot);
      tr.commit();
      auto wait = std::chrono::milliseconds(std::max<std::int64_t>(lease_left_ms + 1, 1));
      if (deadline != Clock::time_point::max()) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        wait = std::max(std::chrono::milliseconds(0), std::min(wait, left));
      }
      if (!w.wait_for(wait)) w.cancel();
    } catch (const Error& e) {
      if (!e.retryable()) throw;
      tr.on_error(e);  // back-off; the loop re-creates the transaction
    }
  }
}

}  // namespace kvq::detail
