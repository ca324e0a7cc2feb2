#include "layers/contention/fulfiller.h"

#include <algorithm>
#include <set>

#include "client/transaction_access.h"
#include "common/clock.h"
#include "kvq/error.h"
#include "layers/contention/end_windows.h"
#include "layers/contention/owned_read.h"

namespace kvq::contention {

struct Fulfiller::Batch {
  const std::string* me = nullptr;  // the leased fulfiller's own request id
  std::int64_t now = 0;             // unix ms, when the batch began
  std::int64_t now_us = 0;          // the same, in µs: due timers are moved up to it
  std::vector<Request> reqs;
  std::size_t cap = 0;       // requests this batch may consume at most
  std::size_t consumed = 0;  // requests answered, expired or dropped, from the front of reqs
  bool first = true;         // no request consumed yet in this transaction
  std::int64_t taken = 0;    // items taken
  bool mine_served = false;
  std::vector<KeyValue> mine_items;
  Cost per_request{kFirstRequestOps, kFirstRequestBytes};
  // The items this batch may hand out, read up front (two range reads, not one per request).
  std::vector<KeyValue> ends[2];  // [Side::kFront] first items, [Side::kBack] last items
  std::size_t next[2] = {0, 0};
  bool exhausted[2] = {false, false};  // that end has no item left for this batch (read_ends)
  // That end's read found fewer items than it asked for, but some: the requests left after them
  // wait for a later read, not for room (for the refill: fewer for either reason).
  bool ran_short[2] = {false, false};
  std::set<std::string> used;  // keys already handed out (the two ends may meet)
};

Fulfiller::Fulfiller(const ControlKeys& keys, ItemRange items, HighContentionOptions options,
                     TransactionLimits limits, bool hint_reads, Refill refill, DueTimers due)
    : keys_(keys),
      items_(std::move(items)),
      options_(options),
      limits_(limits),
      hint_reads_(hint_reads),
      refill_(std::move(refill)),
      due_(std::move(due)) {}

Fulfiller::Result Fulfiller::leased_batch(Transaction& tr, const std::string& me,
                                          bool hand_off_newest) {
  Result r;
  Batch b;
  b.me = &me;
  b.now_us = common::wall_now_us();
  b.now = b.now_us / 1000;
  if (hint_reads_) hint_batch_reads(tr, b);
  if (!holds_lease(tr, me, b.now, &r)) return r;
  reclaim_abandoned(tr, b.now, &r);
  // A snapshot read plus read conflicts on exactly the requests this batch answers: requests
  // registered meanwhile (appended at the end) do not make the batch conflict. Deciding that no
  // request is left (to free the lease) does take a conflict on the whole range.
  b.reqs = read_requests(tr);
  if (b.reqs.empty()) {
    tr.add_read_conflict_range(keys_.req_begin(), keys_.req_end());
    tr.clear(keys_.lease());
    r.kind = Result::kNoRequests;
    return r;
  }
  b.cap = std::min<std::size_t>(b.reqs.size(), static_cast<std::size_t>(options_.batch_size));
  // Serving every request would free the lease, which conflicts with any registration made
  // meanwhile. After such a conflict, leave the newest request for the lease hand-off instead, so
  // that a steady stream of registrations cannot starve the fulfiller.
  if (hand_off_newest && b.reqs.size() <= b.cap && b.cap >= 2) --b.cap;
  if (due_.release) due_.release(tr, b.now_us);
  serve_requests(tr, b, &r);
  finish_leased(tr, b, me, &r);
  return r;
}

bool Fulfiller::serve_all(Transaction& tr) {
  Batch b;
  b.now = now_ms();
  Result r;
  bool any = false, all = false;
  for (;;) {
    b.reqs = read_requests(tr);
    if (b.reqs.empty()) {
      tr.add_read_conflict_range(keys_.req_begin(), keys_.req_end());
      all = true;
      break;
    }
    b.cap = b.reqs.size();
    b.consumed = 0;
    r.items_ran_short = false;
    serve_requests(tr, b, &r);
    any = true;
    // The rest does not fit in this transaction; or, if an end ran short, another round reads it
    // again (what this transaction took is gone from it: it finds the end empty and answers
    // "empty", or the items beyond the ones it read, or the refill's next turns).
    if (r.cut || b.consumed == 0) break;
  }
  if (b.taken > 0) add_size(tr, items_, -b.taken);
  if (any) tr.clear(keys_.lease());
  return all;
}

void Fulfiller::hint_batch_reads(Transaction& tr, const Batch& b) {
  std::vector<OwnedRead> reads = {
      point_read(keys_.slot(*b.me)),
      point_read(keys_.lease()),
      abandoned_read(b.now, kReclaimPerBatch),
      {keys_.req_begin(), keys_.req_end(), {.limit = options_.batch_size + 1}}};
  if (due_.read) reads.push_back(due_.read(b.now_us));
  prefetch(tr, reads);
}

bool Fulfiller::holds_lease(Transaction& tr, const std::string& me, std::int64_t now, Result* r) {
  Slot mine = read_slot(tr, keys_.slot(me));
  if (!mine.waiting()) {
    r->kind = Result::kMineServed;
    return false;
  }
  auto lease = read_lease(tr, keys_, /*snapshot=*/false);
  const bool ok =
      !lease || mine.kind == Slot::kBaton || lease->holder == me || lease->expiry_ms < now;
  if (!ok) r->kind = Result::kNotLeader;
  return ok;
}

std::vector<Fulfiller::Request> Fulfiller::read_requests(Transaction& tr) {
  auto raw = tr.get_range(keys_.req_begin(), keys_.req_end(),
                          {.limit = options_.batch_size + 1, .snapshot = true});
  std::vector<Request> reqs;
  reqs.reserve(raw.size());
  for (auto& kv : raw) {
    RequestValue v = decode_request(kv.value);
    reqs.push_back({std::move(kv.key), std::move(v.id), v.side, v.count});
  }
  return reqs;
}

void Fulfiller::serve_requests(Transaction& tr, Batch& b, Result* r) {
  // Reading an item costs an operation on etcd too (a pin per key read), so read only as many
  // as the requests that can fit.
  const std::size_t room = room_for(tr, b);
  if (room < b.cap - b.consumed) {
    b.cap = b.consumed + room;
    r->cut = true;
  }
  read_ends(tr, b);
  while (b.consumed < b.cap) {
    if (!serve_one(tr, b, b.reqs[b.consumed], r)) {
      if (!r->items_ran_short) r->cut = true;
      return;
    }
  }
}

// Serves (or expires) one request if it fits in the transaction: returns false, changing
// nothing, if it does not. The request's slot is not read: a request key exists exactly while its
// slot waits (registration, fulfilment, withdrawal and expiry change both in one transaction), and
// the read conflict on the request key catches a withdrawal made meanwhile.
bool Fulfiller::serve_one(Transaction& tr, Batch& b, const Request& req, Result* r) {
  const TransactionUsage before = tr.usage();
  const bool mine = b.me && req.id == *b.me;
  const bool expired = !mine && request_created_ms(req.id) < b.now - options_.request_ttl.count();
  std::vector<const KeyValue*> items;
  if (!expired) items = pick_items(b, req, before);
  // "Empty" only if the end really has no item left; items not read (the read was bounded by the
  // operation budget, or ran short) or not fitting leave the request to serve_all's next round or
  // the next batch.
  const int side = static_cast<int>(req.side);
  const bool none_left =
      items.empty() && (expired || (b.exhausted[side] && !peek_item(b, req.side)));
  if (items.empty() && !none_left) {
    r->items_ran_short = b.ran_short[side] && !peek_item(b, req.side);  // else: room
    return false;
  }
  if (none_left && !b.first && !fits(before, b.per_request, 0)) return false;
  tr.add_read_conflict_key(req.key);
  tr.clear(req.key);
  tr.atomic_add(keys_.waiting(), std::int64_t{-1});
  if (expired) {
    tr.clear(keys_.slot(req.id));  // a live popper finds its slot gone and registers again
    ++r->expired;
  } else {
    deliver(tr, b, req, items);
    ++r->served;
  }
  ++b.consumed;
  b.first = false;
  learn_request_cost(b, before, tr.usage(), items);
  return true;
}

// The items `req` gets: the next ones from its end, up to its count, while they fit in the
// transaction (with the request's own cost) and together in one inline slot. The batch's first
// request gets its first item whatever the estimates say. Marks them used.
std::vector<const KeyValue*> Fulfiller::pick_items(Batch& b, const Request& req,
                                                   const TransactionUsage& before) {
  std::vector<const KeyValue*> items;
  std::size_t item_bytes = 0, slot_bytes = 1;
  while (static_cast<std::int64_t>(items.size()) < req.count) {
    const KeyValue* item = peek_item(b, req.side);
    if (!item) break;
    const std::size_t bytes = item->key.size() + item->value.size();
    Cost cost = b.per_request;
    cost.ops += items.size() * kItemOps;
    const bool always = b.first && items.empty();
    if (!always && !fits(before, cost, item_bytes + bytes)) break;
    if (!items.empty() && slot_bytes + delivered_entry_size(*item) > kMaxValueSize) break;
    items.push_back(item);
    b.used.insert(item->key);
    item_bytes += bytes;
    slot_bytes += delivered_entry_size(*item);
  }
  return items;
}

// Keeps the most a request cost beyond its items (ops, bytes), for the estimates of later ones.
void Fulfiller::learn_request_cost(Batch& b, const TransactionUsage& before,
                                   const TransactionUsage& after,
                                   const std::vector<const KeyValue*>& items) {
  std::size_t item_bytes = 0;
  for (const KeyValue* item : items) item_bytes += item->key.size() + item->value.size();
  const std::size_t extra_ops = items.size() > 1 ? (items.size() - 1) * kItemOps : 0;
  // A request can shrink the transaction (clearing a key an earlier one set): it then grew by 0.
  const std::size_t ops =
      after.operations > before.operations ? after.operations - before.operations : 0;
  const std::size_t grew = after.bytes > before.bytes ? after.bytes - before.bytes : 0;
  b.per_request.ops = std::max(b.per_request.ops, ops > extra_ops ? ops - extra_ops : 0);
  b.per_request.bytes =
      std::max(b.per_request.bytes, grew > item_bytes ? grew - item_bytes : std::size_t{0});
}

// How many more requests the operation budget allows (at least one for a batch's first).
std::size_t Fulfiller::room_for(Transaction& tr, const Batch& b) {
  if (limits_.max_operations == kUnbounded) return kUnbounded;
  const std::size_t used = tr.usage().operations + kTailOps;
  const std::size_t n =
      used >= limits_.max_operations ? 0 : (limits_.max_operations - used) / b.per_request.ops;
  return b.first ? std::max<std::size_t>(n, 1) : n;
}

bool Fulfiller::fits(const TransactionUsage& u, const Cost& per_request,
                     std::size_t item_bytes) const {
  return u.operations + per_request.ops + kTailOps <= limits_.max_operations &&
         u.bytes + per_request.bytes + item_bytes + kTailBytes <= limits_.max_bytes;
}

// Reads, for the requests this batch may serve, as many items from each end as they ask for and
// the operation budget has room for. Read-your-writes leaves out items this transaction already
// took (serve_all's later rounds). An end with fewer items than asked for is exhausted only if it
// has none (or the refill stage ran dry): only then are requests answered "empty", with a read
// conflict on the whole range. Otherwise the read conflicts up to the last item found, as single
// pops' would, so pushes committed meanwhile do not make the batch conflict, and the requests
// left without items wait for serve_all's next round or the next batch (serve_one).
void Fulfiller::read_ends(Transaction& tr, Batch& b) {
  std::size_t room = item_room(tr, b);
  std::size_t wanted[2] = {0, 0};
  for (std::size_t i = b.consumed; i < b.cap && room > 0; ++i) {
    const std::size_t n = std::min(static_cast<std::size_t>(b.reqs[i].count), room);
    wanted[static_cast<int>(b.reqs[i].side)] += n;
    room -= n;
  }
  for (int side = 0; side < 2; ++side) {
    b.ends[side].clear();
    b.next[side] = 0;
    b.exhausted[side] = false;
    b.ran_short[side] = false;
    if (wanted[side] == 0) continue;
    const int limit = range_limit(wanted[side]);
    if (refill_ && side == static_cast<int>(Side::kFront)) {
      b.ends[side] = read_end(tr, items_, Side::kFront, limit, /*snapshot=*/false);
      b.exhausted[side] = b.ends[side].size() < wanted[side];
      if (b.exhausted[side]) refill_front(tr, b, wanted[side]);
    } else {
      b.ends[side] = read_end_up_to_last(tr, items_, static_cast<Side>(side), limit);
      b.exhausted[side] = b.ends[side].empty();
      if (b.exhausted[side]) {  // as the read would have added it (not over items cleared here)
        detail::TransactionAccess::add_read_conflict_as_read(tr, items_.begin, items_.end);
      }
    }
    b.ran_short[side] = !b.exhausted[side] && b.ends[side].size() < wanted[side];
  }
}

// Has the refill stage what the front ran short of, within what the transaction has room for
// beside the requests those items serve: on an engine that bounds operations, each staged item
// and the request it goes to share what is left, at the refill's cost per item measured so far
// (a turn costs several operations on etcd: staging without leaving room for the requests would
// serve one request per batch). Slot writes repeat each item's bytes, so a third of the bytes
// left goes to the staged items.
void Fulfiller::refill_front(Transaction& tr, Batch& b, std::size_t wanted) {
  std::vector<KeyValue>& front = b.ends[static_cast<int>(Side::kFront)];
  const TransactionUsage used = tr.usage();
  std::size_t n = wanted - front.size();
  TransactionLimits room = limits_;
  if (limits_.max_operations != kUnbounded) {
    const std::size_t item_ops = refill_item_ops_.load(std::memory_order_relaxed);
    const std::size_t left = used.operations + kTailOps >= limits_.max_operations
                                 ? 0
                                 : limits_.max_operations - used.operations - kTailOps;
    n = std::clamp<std::size_t>(left / (item_ops + b.per_request.ops), 1, n);
    // The refill stops while one more turn at twice the largest so far, plus 8, would pass its
    // room (FairState::turns_that_fit's rule): give it that margin within the requests' share.
    const std::size_t margin = item_ops + 8;
    room.max_operations = std::min(used.operations + n * item_ops + margin,
                                   used.operations + left - std::min(left, n * b.per_request.ops));
  }
  const std::size_t reserve_bytes = used.bytes + kTailBytes + n * b.per_request.bytes;
  room.max_bytes = reserve_bytes >= limits_.max_bytes
                       ? used.bytes
                       : used.bytes + (limits_.max_bytes - reserve_bytes) / 3;
  Refilled more = refill_(tr, n, room);
  if (!more.items.empty()) {
    const std::size_t cost = (tr.usage().operations - used.operations) / more.items.size();
    refill_item_ops_.store(std::max<std::size_t>(cost, 1), std::memory_order_relaxed);
  }
  for (KeyValue& item : more.items) front.push_back(std::move(item));
  b.exhausted[static_cast<int>(Side::kFront)] = more.exhausted;
}

// How many items the operation budget leaves room to read, besides the requests' own cost (at
// least one per request, as each request's first item is in its cost).
std::size_t Fulfiller::item_room(Transaction& tr, const Batch& b) {
  const std::size_t requests = b.cap - b.consumed;
  if (limits_.max_operations == kUnbounded) return kUnbounded;
  const std::size_t used = tr.usage().operations + kTailOps + requests * b.per_request.ops;
  const std::size_t extra =
      used >= limits_.max_operations ? 0 : (limits_.max_operations - used) / kItemOps;
  return requests + extra;
}

// The next item from `side` not yet handed out, or nullptr if there is none.
const KeyValue* Fulfiller::peek_item(Batch& b, Side side) {
  const int s = static_cast<int>(side);
  while (b.next[s] < b.ends[s].size() && b.used.count(b.ends[s][b.next[s]].key)) ++b.next[s];
  return b.next[s] < b.ends[s].size() ? &b.ends[s][b.next[s]] : nullptr;
}

void Fulfiller::deliver(Transaction& tr, Batch& b, const Request& req,
                        const std::vector<const KeyValue*>& items) {
  const std::string slot = keys_.slot(req.id);
  const bool mine = b.me && req.id == *b.me;
  if (mine) b.mine_served = true;
  for (const KeyValue* item : items) tr.clear(item->key);
  b.taken += static_cast<std::int64_t>(items.size());
  if (mine) {
    tr.clear(slot);  // the fulfiller takes its own items directly
    for (const KeyValue* item : items) b.mine_items.push_back(*item);
    return;
  }
  if (items.empty()) {
    tr.set(slot, empty_slot());
    return;
  }
  // Until the popper consumes them (or they are put back), pushes go behind the items' places.
  for (const KeyValue* item : items) set_held(tr, items_, item->key, /*hold=*/true);
  if (auto inline_slot = delivered_inline(items)) {
    tr.set(slot, *inline_slot);
  } else {
    tr.set(keys_.res(req.id), items[0]->value);  // pick_items: only a single item fails to inline
    tr.set(slot, delivered_in_res(items[0]->key));
  }
}

void Fulfiller::finish_leased(Transaction& tr, Batch& b, const std::string& me, Result* r) {
  if (b.taken > 0) add_size(tr, items_, -b.taken);
  if (!b.mine_served) {
    tr.set(keys_.lease(), lease_value(me, lease_expiry(b.now)));
    r->kind = Result::kServedOthers;
    return;
  }
  // Hand the lease to the oldest request still waiting, and wake it through its slot (the next
  // one if that popper withdrew meanwhile: a lease cleared without waking anyone would leave the
  // others asleep until their wake-ups, leases later).
  bool handed = false;
  for (std::size_t i = b.consumed; !handed && i < b.reqs.size() && i < b.consumed + kHandOffTries;
       ++i) {
    handed = hand_lease_to(tr, b.reqs[i].id, lease_expiry(b.now));
  }
  if (!handed) {
    if (b.reqs.size() <= b.consumed) {
      tr.add_read_conflict_range(keys_.req_begin(), keys_.req_end());
    }
    tr.clear(keys_.lease());
  }
  r->kind = Result::kMineTaken;
  r->items = std::move(b.mine_items);
}

// A lease written now lasts options.lease, plus as long again as the batch writing it took so far
// (`started`: when it began). Waiters take over once it expires; without the second term a
// fulfiller whose batches are merely slower than options.lease (a FairQueue's refill, several
// round trips, on a loaded etcd) would have waiters start batches of their own that conflict with
// its every batch.
std::int64_t Fulfiller::lease_expiry(std::int64_t started) const {
  const std::int64_t now = now_ms();
  return now + options_.lease.count() + std::max<std::int64_t>(now - started, 0);
}

bool Fulfiller::hand_lease_to(Transaction& tr, const std::string& id, std::int64_t expiry) {
  Slot s = read_slot(tr, keys_.slot(id));
  if (!s.waiting()) return false;
  tr.set(keys_.lease(), lease_value(id, expiry));
  tr.set(keys_.slot(id), baton_slot(s.stamp));
  return true;
}

void Fulfiller::pass_baton(Transaction& tr, const std::string& me) {
  for (const std::string& id : first_request_ids(tr, keys_, 2, /*snapshot=*/false)) {
    if (id == me) continue;
    if (hand_lease_to(tr, id, lease_expiry(now_ms()))) return;
  }
  tr.clear(keys_.lease());
}

}  // namespace kvq::contention
