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
constexpr char kDeliveredInRes = '\x04';  // delivered; the value (too big to inline) is in res
constexpr std::size_t kRandomSize = 20;  // as the recipes' os.urandom(20)
constexpr std::int64_t kFreeLeaseGraceMs = 2;

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

// What each thread's last operation on each store left behind: its idempotency marker and the
// slot of its last high-contention pop. The thread's next operation on the same store clears
// them (blind clears, no conflicts), so live clients keep at most one of each.
struct Leftovers {
  std::string marker;
  std::string slot;
};
Leftovers& leftovers(std::uint64_t store_id) {
  thread_local std::unordered_map<std::uint64_t, Leftovers> map;
  return map[store_id];
}

void clear_leftovers(Transaction& tr, const Leftovers& l) {
  if (!l.marker.empty()) tr.clear(l.marker);
  if (!l.slot.empty()) tr.clear(l.slot);
}

std::string big_endian64(std::int64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return out;
}

}  // namespace

ContentionStats& contention_stats() {
  static ContentionStats stats;
  return stats;
}

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
  enum Kind { kNoRequests, kServedOthers, kMineServed, kMineTaken, kNotLeader } kind = kNoRequests;
  std::optional<std::string> value;  // kMineTaken: what the leader popped for itself
  std::uint64_t served = 0;          // requests answered
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
  waiting_key_ = control_.pack(Tuple().append("waiting"));
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
  clear_leftovers(tr, leftovers(store_id_));
  if (rng()() % 64 == 0) {
    // Leftovers of clients that went away: markers and pop slots older than marker_ttl (slot ids
    // start with their creation time, big-endian, so they sort by age).
    const std::int64_t cut = now_ms() - static_cast<std::int64_t>(options_.marker_ttl.count());
    tr.clear_range(marker_prefix_ + '\x00', control_.pack(Tuple().append("mark").append(cut)));
    for (const char* kind : {"slot", "res"}) {
      tr.clear_range(control_.pack(Tuple().append(kind)) + '\x00',
                     control_.pack(Tuple().append(kind).append(Bytes(big_endian64(cut)))));
    }
  }
}

void ItemStore::remember_marker(const std::string& marker) {
  Leftovers& l = leftovers(store_id_);
  l.marker = marker;
  l.slot.clear();
}

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
    // A point read of the waiting-request count (not a scan of the request range); it conflicts
    // with every registration and fulfilment, like a read of the whole range would.
    auto waiting = tr.get(waiting_key_);
    if (waiting && decode_le64(*waiting) != 0) return std::nullopt;
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
  // The id starts with the creation time so that abandoned slots can be swept by age.
  const std::string id = big_endian64(now_ms()) + random_bytes(kRandomSize - 8);
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
      if (maybe_done && tr.get(slot)) {
        leftovers(store_id_) = Leftovers{};
        return id;
      }
      tr.set_versionstamped_key(req, value);
      tr.atomic_add(waiting_key_, std::int64_t{1});
      tr.set_versionstamped_value(slot, slot_value);
      clear_leftovers(tr, leftovers(store_id_));
      tr.commit();
      leftovers(store_id_) = Leftovers{};
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
ItemStore::BatchResult ItemStore::fulfil_batch(Transaction& tr, const std::string* me,
                                               bool hand_off_newest) {
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
  // A snapshot read plus read conflicts on exactly the requests this batch answers: requests
  // registered meanwhile (appended at the end of the range) do not make the batch conflict.
  // Deciding that no request is left (to free the lease) does take a conflict on the whole range.
  auto raw = tr.get_range(req_begin_, req_end_, {.limit = hc.batch_size + 1, .snapshot = true});
  if (raw.empty()) {
    tr.add_read_conflict_range(req_begin_, req_end_);
    if (me) tr.clear(lease_key_);
    result.kind = BatchResult::kNoRequests;
    return result;
  }
  std::vector<Request> reqs;
  reqs.reserve(raw.size());
  for (const auto& kv : raw) {
    Tuple v = Tuple::unpack(kv.value);
    reqs.push_back({kv.key, v.get_bytes(0).data, static_cast<Side>(v.get_int(1))});
  }
  std::size_t n = std::min<std::size_t>(reqs.size(), hc.batch_size);
  // Serving every request would free the lease, which conflicts with any registration made
  // meanwhile. After such a conflict, leave the newest request unserved and hand it the lease
  // instead, so that a steady stream of registrations cannot starve the fulfiller.
  if (me && hand_off_newest && reqs.size() <= n && n >= 2) --n;
  int n_front = 0, n_back = 0;
  for (std::size_t i = 0; i < n; ++i) (reqs[i].side == Side::kFront ? n_front : n_back)++;
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
    tr.add_read_conflict_key(r.key);
    tr.clear(r.key);
    tr.atomic_add(waiting_key_, std::int64_t{-1});
    if (!is_waiting(tr.get(slot))) continue;  // stale request (cannot happen; defensive)
    ++result.served;
    std::vector<KeyValue>& list = r.side == Side::kFront ? front : back;
    std::size_t& idx = r.side == Side::kFront ? fi : bi;
    while (idx < list.size() && used.count(list[idx].key)) ++idx;
    const bool mine = me && r.id == *me;
    if (mine) mine_served = true;
    if (idx < list.size()) {
      const KeyValue& item = list[idx++];
      used.insert(item.key);
      tr.clear(item.key);
      ++taken;
      if (mine) {
        tr.clear(slot);  // the leader takes its own item directly
        result.value = item.value;
      } else if (item.value.size() < kMaxValueSize) {
        tr.set(slot, std::string(1, kDelivered) + item.value);
      } else {
        tr.set(res_key(r.id), item.value);
        tr.set(slot, std::string(1, kDeliveredInRes));
      }
    } else if (mine) {
      tr.clear(slot);
    } else {
      tr.set(slot, std::string(1, kEmpty));
    }
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
      if (!handed) {
        if (reqs.size() <= n) tr.add_read_conflict_range(req_begin_, req_end_);
        tr.clear(lease_key_);
      }
      result.kind = BatchResult::kMineTaken;
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
  while (fulfil_batch(tr, nullptr, false).kind != BatchResult::kNoRequests) served = true;
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
        seen = s->substr(1);
        seen_delivered = true;
      } else if ((*s)[0] == kDeliveredInRes) {
        seen = tr.get(res);
        if (!seen) throw Error(ErrorCode::kInternalError, "queue: delivered result missing");
        seen_delivered = true;
        tr.clear(res);
      } else if ((*s)[0] == kEmpty) {
        seen_delivered = true;  // nullopt is a real answer: the queue was empty
      } else {
        if (s->size() != 11) throw Error(ErrorCode::kCorruption, "queue: bad pop slot");
        tr.clear(req_key(s->substr(1)));
        tr.atomic_add(waiting_key_, std::int64_t{-1});
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
  ContentionStats& stats = contention_stats();
  if (!staged) {
    stats.fast_pops.fetch_add(1, std::memory_order_relaxed);
    return fast;
  }
  stats.staged_pops.fetch_add(1, std::memory_order_relaxed);
  const std::string me = register_request(side);
  const std::string slot = slot_key(me);
  const std::string res = res_key(me);
  std::optional<std::string> taken;  // value read by a consume attempt that may have committed
  bool maybe_consumed = false;
  bool waited_for_free_lease = false;
  for (;;) {
    Transaction tr = db_->create_transaction();
    try {
      auto s = tr.get(slot);
      if (!s || s->empty()) {
        if (maybe_consumed) return taken;
        // Only the age sweep removes a slot its popper did not: a pop older than marker_ttl.
        throw Error(ErrorCode::kTimedOut, "queue: pop request expired (older than marker_ttl)");
      }
      if ((*s)[0] == kDelivered || (*s)[0] == kEmpty) {
        // Ours alone from here on: nobody but this popper touches a delivered slot. It is left for
        // this thread's next operation to clear (or the age sweep), saving a commit per pop.
        leftovers(store_id_).slot = slot;
        if ((*s)[0] == kEmpty) return std::nullopt;
        return s->substr(1);
      }
      if ((*s)[0] == kDeliveredInRes) {
        taken = tr.get(res);
        if (!taken) throw Error(ErrorCode::kInternalError, "queue: delivered result missing");
        tr.clear(res);
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
      bool lead = (*s)[0] == kBaton;
      if (lease) {
        Tuple l = Tuple::unpack(*lease);
        lease_left_ms = l.get_int(1) - now_ms();
        lead = lead || l.get_bytes(0).data == me || lease_left_ms < 0;
      } else if (!lead) {
        // No fulfiller: the popper with the oldest request takes the lease, the others give it a
        // moment (kFreeLeaseGraceMs, still woken at once by their watch) before competing for
        // it, so that would-be fulfillers do not all conflict with each other.
        auto oldest = tr.get_range(req_begin_, req_end_, {.limit = 1, .snapshot = true});
        lead = oldest.empty() || waited_for_free_lease ||
               Tuple::unpack(oldest[0].value).get_bytes(0).data == me;
        if (!lead) {
          waited_for_free_lease = true;
          lease_left_ms = kFreeLeaseGraceMs;
        }
      }
      if (lead) {
        tr.reset();
        // Fulfil batches until our own request is served or another popper holds the lease.
        bool hand_off_newest = false;
        for (;;) {
          if (Clock::now() >= deadline) break;
          Transaction ftr = db_->create_transaction();
          BatchResult r;
          try {
            r = fulfil_batch(ftr, &me, hand_off_newest);
            ftr.commit();
            hand_off_newest = false;
            if (r.kind == BatchResult::kServedOthers || r.kind == BatchResult::kMineTaken) {
              stats.batches.fetch_add(1, std::memory_order_relaxed);
              stats.served.fetch_add(r.served, std::memory_order_relaxed);
            }
          } catch (const Error& e) {
            if (!e.retryable()) throw;
            stats.batch_conflicts.fetch_add(1, std::memory_order_relaxed);
            if (e.maybe_committed()) {
              // Re-read our slot from scratch; if it is gone, this attempt took our item.
              if (r.kind == BatchResult::kMineTaken) {
                maybe_consumed = true;
                taken = r.value;
              }
              break;
            }
            hand_off_newest = true;
            ftr.on_error(e);
            continue;
          }
          if (r.kind == BatchResult::kMineTaken) return r.value;
          if (r.kind != BatchResult::kServedOthers) break;
        }
        continue;
      }
      stats.watch_waits.fetch_add(1, std::memory_order_relaxed);
      Watch w = tr.watch(slot);
      tr.commit();
      tr.reset();  // release the read version while waiting (it pins MVCC garbage collection)
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
