// Internal: fulfilment of waiting high-contention pops (docs/queues.md, "High-contention pops").
//
// One transaction (a batch) answers the oldest waiting requests in registration order: each takes
// the next items from its end (as many as it asks for and the batch has room for, at least one),
// or "empty". A batch is filled up to the engine's TransactionLimits,
// measured with Transaction::usage() before each request (bytes and etcd's operations, with room
// kept for the lease and counter writes), and at most options.batch_size requests; the first
// request of a batch is always served, so a batch always makes progress. A batch also expires
// requests older than options.request_ttl (their poppers presumably died) and puts items delivered
// to such poppers back where they were.
//
// The items a batch hands out are the first ones of the item range. A structure whose pops do
// not simply take the first keys of one range (a FairQueue: the next tenants' turns) keeps a
// staging range as the item range and gives a Refill: when the range holds fewer items than the
// batch's requests ask for from its front, the fulfiller has the refill move the next items into
// it, in the same transaction, and hands them out from there (items a batch had no room to hand
// out stay staged, first in line for the next batch or pop).
#ifndef KVQ_SRC_LAYERS_CONTENTION_FULFILLER_H_
#define KVQ_SRC_LAYERS_CONTENTION_FULFILLER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kvq/database.h"
#include "kvq/queue.h"
#include "layers/contention/control.h"
#include "layers/contention/owned_read.h"

namespace kvq::contention {

// Moves up to `n` (>= 1) of the structure's next items (those its pops would take next) into the
// item range, in `tr`, keyed after every item the range holds; `room` is what the transaction may
// use in all (Database::limits() minus what the batch still needs: the refill stops before its
// usage passes it, though it always moves at least one item if there is one).
// Returns the items it staged, in order, and `exhausted` if there were no more to stage (fewer
// than n and not because of `room`).
struct Refilled {
  std::vector<KeyValue> items;
  bool exhausted = false;
};
using Refill =
    std::function<Refilled(Transaction& tr, std::size_t n, const TransactionLimits& room)>;

// The items that become ready without a push (a work queue's due timers: expired leases, due
// delayed items). A batch makes them ready before it reads the ends, so that the requests waiting
// longest get them, as the next pop would.
struct DueTimers {
  // The read that finds the timers due by `now_us`: a batch hands it to Transaction::prefetch
  // with its first reads (one round trip on etcd, not two).
  std::function<OwnedRead(std::int64_t now_us)> read;
  // Makes the timers due by `now_us` ready in `tr`, making the read above.
  std::function<void(Transaction& tr, std::int64_t now_us)> release;
};

class Fulfiller {
 public:
  struct Result {
    enum Kind { kNoRequests, kServedOthers, kMineServed, kMineTaken, kNotLeader };
    Kind kind = kNoRequests;
    std::vector<KeyValue> items;  // kMineTaken: what the fulfiller took for itself
    std::uint64_t served = 0;     // requests answered
    std::uint64_t expired = 0;    // abandoned requests withdrawn
    std::uint64_t reclaimed = 0;  // abandoned deliveries put back
    bool cut = false;             // the engine's limits ended the batch early
    // An end's read found fewer items than the requests asked for (but some), and they ran out:
    // the requests left wait for a later read (fulfiller.cc read_ends), not "empty", and not for
    // room (`cut`).
    bool items_ran_short = false;
  };

  // `keys` must outlive the Fulfiller. `refill`, `due` (optional): see Refill, DueTimers.
  // With `hint_reads` (Database::reads_take_round_trips), a batch hands its first reads to
  // Transaction::prefetch.
  Fulfiller(const ControlKeys& keys, ItemRange items, HighContentionOptions options,
            TransactionLimits limits, bool hint_reads, Refill refill = {}, DueTimers due = {});

  // One batch under the fulfiller lease, for the waiting popper `me`: proceeds only if the lease is
  // free, expired, ours or handed to us; renews it, and hands it on once our request is served
  // (kMineTaken, with our item). kMineServed: our request was already answered or is gone;
  // kNotLeader: someone else holds the lease. `hand_off_newest` (after a conflict): leave the
  // newest request unserved and hand it the lease rather than free it.
  Result leased_batch(Transaction& tr, const std::string& me, bool hand_off_newest);
  // Answers every waiting request that fits in `tr` (composed pops, clear), ignoring the lease;
  // an end that runs short is read again in `tr` (found empty there, it answers "empty"). False if
  // requests are left waiting (the rest did not fit in `tr`): a pop in `tr` would overtake them.
  bool serve_all(Transaction& tr);
  // Passes the lease from `me` (giving up) to the oldest other waiting request, or frees it.
  void pass_baton(Transaction& tr, const std::string& me);
  // Puts the items delivered to slot `s` of request `id` back at their keys (+1 to the size each),
  // frees their held places and clears the slot and its res key.
  void put_back(Transaction& tr, const std::string& id, const Slot& s);
  // Puts `item` back at its key (+1 to the size).
  void restore(Transaction& tr, const KeyValue& item);
  // Frees the held places of `items`, delivered to a slot whose popper now takes them.
  void consumed(Transaction& tr, const std::vector<KeyValue>& items);
  // True if some slot is older than request_ttl (snapshot read): a batch would reclaim it.
  bool has_abandoned(Transaction& tr, std::int64_t now_ms);
  // The first `limit` slots older than request_ttl at `now_ms` (unix ms), a snapshot read: what
  // has_abandoned reads (limit 1) and a batch reclaims (for Transaction::prefetch too).
  OwnedRead abandoned_read(std::int64_t now_ms, int limit) const;

 private:
  // Estimated cost of serving one request before any was measured (a request's conflicts and writes
  // on etcd are about 8 operations and a few hundred bytes plus the item), and what the end of a
  // batch may still add: lease, size and waiting writes, the hand-off (a slot read and write), the
  // read conflict on the whole request range, and the batch's idempotency marker with the two
  // finished markers it clears and a sweep (staged_pop.cc, markers.h: 5 operations).
  static constexpr std::size_t kFirstRequestOps = 8;
  static constexpr std::size_t kFirstRequestBytes = 2048;
  static constexpr std::size_t kTailOps = 16;
  static constexpr std::size_t kTailBytes = 4608;
  // What each item beyond a request's first adds on etcd: the read's pin of its key, its clear and
  // its held place.
  static constexpr std::size_t kItemOps = 3;
  // Abandoned slots one batch looks at.
  static constexpr int kReclaimPerBatch = 8;
  // Waiting requests a batch that took its own items offers the lease to, oldest first, until one
  // takes it (one that withdrew meanwhile does not; each refusal costs a slot read, within
  // kTailOps).
  static constexpr std::size_t kHandOffTries = 2;
  // TransactionLimits::max_operations of engines that do not count operations.
  static constexpr std::size_t kUnbounded = std::numeric_limits<std::size_t>::max();

  struct Request {
    std::string key, id;
    Side side;
    std::int64_t count;  // items asked for
  };
  struct Cost {
    std::size_t ops, bytes;
  };
  struct Batch;

  // Tells `tr` the reads leased_batch makes before it serves (our slot, the lease, the abandoned
  // slots, the requests and the due timers): one round trip on etcd instead of five.
  void hint_batch_reads(Transaction& tr, const Batch& b);
  bool holds_lease(Transaction& tr, const std::string& me, std::int64_t now, Result* r);
  std::vector<Request> read_requests(Transaction& tr);
  void reclaim_abandoned(Transaction& tr, std::int64_t now, Result* r);
  // Reclaims the abandoned slot `slot` (older than `cut`); false, leaving it, if it holds a
  // delivery that would not fit beside the batch's work after an earlier one of this batch.
  bool reclaim_one(Transaction& tr, const std::string& slot, std::int64_t cut, Result* r);
  // Whether putting back the delivery `s` fits in `tr`, with room left for a batch's first
  // request and its tail (about: the operations are etcd's).
  bool room_to_put_back(Transaction& tr, const Slot& s) const;
  void serve_requests(Transaction& tr, Batch& b, Result* r);
  bool serve_one(Transaction& tr, Batch& b, const Request& req, Result* r);
  std::size_t room_for(Transaction& tr, const Batch& b);
  bool fits(const TransactionUsage& u, const Cost& per_request, std::size_t item_bytes) const;
  void read_ends(Transaction& tr, Batch& b);
  void refill_front(Transaction& tr, Batch& b, std::size_t wanted);
  const KeyValue* peek_item(Batch& b, Side side);
  std::vector<const KeyValue*> pick_items(Batch& b, const Request& req,
                                          const TransactionUsage& before);
  static void learn_request_cost(Batch& b, const TransactionUsage& before,
                                 const TransactionUsage& after,
                                 const std::vector<const KeyValue*>& items);
  std::size_t item_room(Transaction& tr, const Batch& b);
  void deliver(Transaction& tr, Batch& b, const Request& req,
               const std::vector<const KeyValue*>& items);
  void finish_leased(Transaction& tr, Batch& b, const std::string& me, Result* r);
  std::int64_t lease_expiry(std::int64_t started) const;
  // Hands the lease (until `expiry`, unix ms) to request `id` if it still waits.
  bool hand_lease_to(Transaction& tr, const std::string& id, std::int64_t expiry);

  const ControlKeys& keys_;
  ItemRange items_;
  HighContentionOptions options_;
  TransactionLimits limits_;
  bool hint_reads_;
  Refill refill_;
  DueTimers due_;
  // Operations the refill took per item it staged, last measured (engines that bound them).
  std::atomic<std::size_t> refill_item_ops_{8};
};

}  // namespace kvq::contention

#endif  // KVQ_SRC_LAYERS_CONTENTION_FULFILLER_H_
