#include "layers/contention/staged_pop.h"

#include <algorithm>

#include "common/bytes.h"
#include "common/clock.h"
#include "kvq/error.h"
#include "layers/contention/marked_run.h"
#include "layers/contention/owned_read.h"
#include "layers/contention/run_once.h"
#include "layers/contention/stats.h"

namespace kvq::contention {
namespace {

// With the lease free, the popper with the oldest request takes it; the others give it this long
// (still woken at once by their watch) before competing, so would-be fulfillers do not all
// conflict with each other.
constexpr std::int64_t kFreeLeaseGraceMs = 2;
// While the lease is held, only the popper next in line after the holder wakes at its expiry (it
// takes over if the holder is gone); the others wake this many leases later, in case it is gone
// too. A holder renews the lease with every batch, so their wake-ups at its old expiry would
// mostly find it renewed and sleep again: an etcd read and a new watch each.
constexpr std::int64_t kLeasesBehindTheNext = 2;
// The request range's first entries that await reads: the oldest request, and the next one (the
// oldest may be the lease holder's own).
constexpr int kFirstRequests = 2;
// Bounds of the best-effort withdrawal of a failed pop.
constexpr TransactionOptions kAbandonOptions{.timeout = std::chrono::milliseconds(5000),
                                             .retry_limit = 20};
// A conflicting fulfilment batch retries at once (hand_off_newest removes the usual cause): a long
// back-off would only let the lease run out under the waiting poppers.
constexpr TransactionOptions kBatchOptions{.max_retry_delay = std::chrono::milliseconds(4)};
// Finished markers a fulfilment batch clears (its tail keeps room for these: fulfiller.cc).
constexpr std::size_t kBatchMarkerClears = 2;

// Whether a fulfilment batch wrote anything (so its marker must be written too).
bool wrote_batch(const Fulfiller::Result& r) {
  return r.kind != Fulfiller::Result::kNotLeader && r.kind != Fulfiller::Result::kMineServed;
}

// Adds what a fulfilment batch `r`, committed after `attempts` attempts, did to the stats.
void count_batch(const Fulfiller::Result& r, int attempts) {
  detail::ContentionStats& stats = detail::contention_stats();
  stats.batch_conflicts.fetch_add(static_cast<std::uint64_t>(attempts - 1),
                                  std::memory_order_relaxed);
  stats.expired.fetch_add(r.expired, std::memory_order_relaxed);
  stats.reclaimed.fetch_add(r.reclaimed, std::memory_order_relaxed);
  if (r.cut) stats.budget_cuts.fetch_add(1, std::memory_order_relaxed);
  if (r.kind == Fulfiller::Result::kServedOthers || r.kind == Fulfiller::Result::kMineTaken) {
    stats.batches.fetch_add(1, std::memory_order_relaxed);
    stats.served.fetch_add(r.served, std::memory_order_relaxed);
  }
}

}  // namespace

StagedPops::StagedPops(std::shared_ptr<Database> db, const Subspace& control, ItemRange items,
                       HighContentionOptions options, detail::Markers& markers, Refill refill,
                       DueTimers due)
    : db_(std::move(db)),
      keys_(control),
      options_(options),
      markers_(markers),
      hint_reads_(db_->reads_take_round_trips()),
      fulfiller_(keys_, std::move(items), options, db_->limits(), hint_reads_, std::move(refill),
                 std::move(due)) {}

std::optional<std::string> StagedPops::pop(Side side, Clock::time_point deadline) {
  std::vector<std::string> got = pop_many(side, 1, deadline);
  if (got.empty()) return std::nullopt;
  return std::move(got.front());
}

std::vector<std::string> StagedPops::pop_many(Side side, std::int64_t n,
                                              Clock::time_point deadline) {
  std::vector<std::string> values;
  for (KeyValue& item : pop_items(side, n, deadline)) values.push_back(std::move(item.value));
  return values;
}

std::vector<KeyValue> StagedPops::pop_items(Side side, std::int64_t n, Clock::time_point deadline) {
  for (;;) {
    const std::string me = register_request(side, n, deadline);
    InHand in_hand;
    Outcome o;
    try {
      o = await(me, deadline, &in_hand);
    } catch (...) {
      abandon(me, in_hand);
      throw;
    }
    if (!o.gone) return std::move(o.items);
    // Slower than request_ttl: the request expired (or its item went back); queue up again.
  }
}

bool StagedPops::requests_waiting(Transaction& tr) {
  const std::optional<std::string> waiting = tr.get(keys_.waiting());
  return waiting && common::decode_le64(*waiting) != 0;
}

std::string StagedPops::register_request(Side side, std::int64_t n, Clock::time_point deadline) {
  const std::string id = new_request_id();
  const std::string slot = keys_.slot(id);
  const std::string value = encode_request({id, side, n});
  detail::contention_stats().requests.fetch_add(1, std::memory_order_relaxed);
  TransactionOptions options;
  options.timeout = common::timeout_until(deadline);
  try {
    run_once(
        *db_,
        [&](Transaction& tr) {
          // Of two attempts (one in doubt, landing late, and its retry that found no slot), at
          // most one commits: each writes the slot this reads with a conflict. (A read, not a
          // bare conflict key: on etcd that would cost a read version and a pin read besides.)
          tr.get(slot);
          tr.set_versionstamped_key(keys_.req_placeholder(), value);
          tr.atomic_add(keys_.waiting(), std::int64_t{1});
          tr.set_versionstamped_value(slot, waiting_slot_placeholder());
          return 0;
        },
        // A registration that may have committed is resolved before giving up at the deadline:
        // one left behind would get items delivered that nobody takes until request_ttl.
        // Every attempt registers the same request (and returns 0): any of them will do. If
        // none did, the slot answered "empty" fences them off (a fulfilment batch clears it
        // after request_ttl, as an abandoned slot); an "empty" slot is therefore no
        // registration (a fence in doubt that landed must not pass for one).
        [&](Transaction& tr, std::size_t) {
          const Slot::Kind kind = read_slot(tr, slot).kind;
          return kind != Slot::kAbsent && kind != Slot::kEmpty;
        },
        options, markers_.resolve_window(), [&](Transaction& tr) { tr.set(slot, empty_slot()); });
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kTransactionTimedOut) throw;
    throw Error(
        ErrorCode::kTimedOut,
        std::string("queue: a high-contention pop could not register its request in time: ") +
            e.what());
  }
  return id;
}

StagedPops::Outcome StagedPops::await(const std::string& me, Clock::time_point deadline,
                                      InHand* in_hand) {
  const std::string slot = keys_.slot(me);
  bool waited_for_free_lease = false;
  for (;;) {
    Transaction tr = db_->create_transaction();
    try {
      if (hint_reads_) hint_await_reads(tr, slot);
      Slot s = read_slot(tr, slot);
      if (s.kind == Slot::kAbsent) return Outcome{true, {}};
      if (!s.waiting()) return settle(tr, me, std::move(s), /*withdraw_waiting=*/false, in_hand);
      if (common::clock().steady_now() >= deadline) {
        Outcome o = settle(tr, me, std::move(s), /*withdraw_waiting=*/true, in_hand);
        if (o.gone) throw Error(ErrorCode::kTimedOut, "queue: pop timed out (request withdrawn)");
        return o;
      }
      std::int64_t wait_ms = 0;
      if (should_lead(tr, me, s, &waited_for_free_lease, &wait_ms)) {
        tr.reset();
        if (auto o = lead(me, deadline, in_hand)) return std::move(*o);
        continue;
      }
      wait_on_slot(tr, slot, wait_ms, deadline);
    } catch (const Error& e) {
      // settle's errors come here already refused by its on_error, and with tr's default options
      // on_error refuses only errors that are not retryable: they are rethrown, not retried twice.
      if (!e.retryable()) throw;
      tr.on_error(e);  // back-off; the loop creates a new transaction
    }
  }
}

// Tells `tr` the reads of one turn of await: our slot, then (should_lead) the lease and the first
// requests. One round trip on etcd instead of up to three.
void StagedPops::hint_await_reads(Transaction& tr, const std::string& slot) {
  const OwnedRead reads[] = {point_read(slot),
                             point_read(keys_.lease()),
                             {keys_.req_begin(), keys_.req_end(), {.limit = kFirstRequests}}};
  prefetch(tr, reads);
}

// Whether this waiting popper should fulfil now; otherwise *wait_ms is how long to wait at most.
bool StagedPops::should_lead(Transaction& tr, const std::string& me, const Slot& s, bool* waited,
                             std::int64_t* wait_ms) {
  if (s.kind == Slot::kBaton) return true;
  auto lease = read_lease(tr, keys_, /*snapshot=*/true);
  if (lease) {
    *wait_ms = lease->expiry_ms - now_ms();
    if (lease->holder == me || *wait_ms < 0) return true;
    if (next_after(first_request_ids(tr, keys_, kFirstRequests, /*snapshot=*/true),
                   lease->holder) != me) {
      *wait_ms += kLeasesBehindTheNext * options_.lease.count();
    }
    return false;
  }
  const std::vector<std::string> first =
      first_request_ids(tr, keys_, kFirstRequests, /*snapshot=*/true);
  if (first.empty() || *waited || first.front() == me) return true;
  *waited = true;
  *wait_ms = kFreeLeaseGraceMs;
  return false;
}

// The first of `ids` that is not `holder` (empty if none).
std::string StagedPops::next_after(const std::vector<std::string>& ids, const std::string& holder) {
  for (const std::string& id : ids) {
    if (id != holder) return id;
  }
  return {};
}

// Fulfils batches until our own request is served (its outcome) or the lease is someone else's
// (nullopt: wait again). A batch that takes our items leaves them in `in_hand` while it may commit.
std::optional<StagedPops::Outcome> StagedPops::lead(const std::string& me,
                                                    Clock::time_point deadline, InHand* in_hand) {
  for (;;) {
    if (common::clock().steady_now() >= deadline) return std::nullopt;
    int attempts = 0;
    // One attempt at a batch; after a conflict, the newest request is left to take the lease.
    auto batch_attempt = [&](Transaction& attempt) {
      const auto k = static_cast<std::size_t>(attempts++);  // run_marked_in's attempt number
      Fulfiller::Result batch = fulfiller_.leased_batch(attempt, me, k > 0);
      // Our items are in hand while this attempt may commit (abandon() may put them back).
      if (batch.kind == Fulfiller::Result::kMineTaken) in_hand->taken[k] = batch.items;
      return batch;
    };
    in_hand->begin(markers_.make());
    Transaction tr = db_->create_transaction(kBatchOptions);
    Fulfiller::Result r = detail::run_marked_in(tr, *db_, markers_, in_hand->marker, batch_attempt,
                                                wrote_batch, {.max_clears = kBatchMarkerClears});
    if (r.kind != Fulfiller::Result::kMineTaken) in_hand->taken.clear();  // not ours to give back
    count_batch(r, attempts);
    if (r.kind == Fulfiller::Result::kMineTaken) return Outcome{false, std::move(r.items)};
    if (r.kind != Fulfiller::Result::kServedOthers) return std::nullopt;
  }
}

void StagedPops::wait_on_slot(Transaction& tr, const std::string& slot, std::int64_t wait_ms,
                              Clock::time_point deadline) {
  detail::contention_stats().watch_waits.fetch_add(1, std::memory_order_relaxed);
  Watch w = tr.watch(slot);
  tr.commit();
  tr.reset();  // release the read version while waiting (it pins MVCC garbage collection)
  auto wait = std::chrono::milliseconds(std::max<std::int64_t>(wait_ms + 1, 1));
  if (deadline != Clock::time_point::max()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                      common::clock().steady_now());
    wait = std::max(std::chrono::milliseconds(0), std::min(wait, left));
  }
  if (!w.wait_for(wait)) w.cancel();
}

// Takes the answer delivered to our slot (clearing it) in one transaction, starting in `first`, in
// which await read our slot as `read`; with `withdraw_waiting`, a request still waiting is
// withdrawn instead (gone). The items taken stay in `in_hand` while the transaction may commit.
StagedPops::Outcome StagedPops::settle(Transaction& first, const std::string& me, Slot read,
                                       bool withdraw_waiting, InHand* in_hand) {
  const std::string slot = keys_.slot(me);
  std::optional<Slot> read_by_await = std::move(read);  // the first attempt's, not read again
  in_hand->begin(markers_.make());
  bool wrote = false;  // the attempt took or withdrew (an absent slot leaves nothing to write)
  std::size_t attempts = 0;
  return detail::run_marked_in(
      first, *db_, markers_, in_hand->marker,
      [&](Transaction& tr) {
        const std::size_t k = attempts++;  // run_marked_in's attempt number
        Slot s = read_by_await ? std::move(*read_by_await) : read_slot(tr, slot);
        read_by_await.reset();
        wrote = s.kind != Slot::kAbsent;
        if (s.waiting()) {
          if (!withdraw_waiting) throw Error(ErrorCode::kInternalError, "queue: slot not answered");
          withdraw(tr, me, s);
        }
        if (s.kind == Slot::kAbsent || s.waiting()) return Outcome{true, {}};
        if (s.kind == Slot::kDelivered) take_delivered(tr, me, &s);
        fulfiller_.consumed(tr, s.items);
        in_hand->taken[k] = s.items;
        tr.clear(slot);
        return Outcome{false, std::move(s.items)};
      },
      [&](const Outcome&) { return wrote; });
}

// Fills in the value of a delivered slot `s` of ours kept in res, clearing res.
void StagedPops::take_delivered(Transaction& tr, const std::string& me, Slot* s) {
  if (!s->value_in_res) return;
  std::optional<std::string> value = tr.get(keys_.res(me));
  if (!value) throw Error(ErrorCode::kCorruption, "queue: delivered value is missing");
  s->items.front().value = std::move(*value);
  tr.clear(keys_.res(me));
}

// In `tr`: removes our waiting request and slot, passing the lease on if we hold it.
void StagedPops::withdraw(Transaction& tr, const std::string& me, const Slot& s) {
  tr.clear(keys_.req(s.stamp));
  tr.atomic_add(keys_.waiting(), std::int64_t{-1});
  auto lease = read_lease(tr, keys_, /*snapshot=*/false);
  if (s.kind == Slot::kBaton || (lease && lease->holder == me)) fulfiller_.pass_baton(tr, me);
  tr.clear(keys_.slot(me));
}

// A pop leaving by an exception: withdraw the request, or put delivered items back, in one
// transaction. If our slot is gone and the marker of the transaction that had items in hand holds
// the number of an attempt that took items, that attempt committed: its items go back from our
// hands (a fence, or another attempt's number, says those items were not taken). Best effort (the
// engine may be what failed): a request or delivery left behind is expired or put back by a later
// fulfiller after request_ttl.
void StagedPops::abandon(const std::string& me, const InHand& in_hand) noexcept {
  const std::string slot = keys_.slot(me);
  try {
    Transaction tr = db_->create_transaction(kAbandonOptions);
    detail::run_marked_in(
        tr, *db_, markers_, markers_.make(),
        [&](Transaction& attempt) {
          Slot s = read_slot(attempt, slot);
          if (s.waiting()) withdraw(attempt, me, s);
          if (s.kind == Slot::kDelivered) fulfiller_.put_back(attempt, me, s);
          if (s.kind == Slot::kEmpty) attempt.clear(slot);
          if (s.kind != Slot::kAbsent) return 0;
          for (const auto& [k, items] : in_hand.taken) {
            if (!detail::Markers::written_by(attempt, in_hand.marker, k)) continue;
            for (const KeyValue& item : items) fulfiller_.restore(attempt, item);
          }
          return 0;
        },
        [](int) { return true; }, {.resolve = false});
    detail::contention_stats().abandoned.fetch_add(1, std::memory_order_relaxed);
  } catch (...) {
    // Left for request expiry (see above); the caller rethrows its own error.
  }
}

}  // namespace kvq::contention
