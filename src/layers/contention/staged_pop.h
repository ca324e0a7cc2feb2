// Internal: high-contention pops that queue up (docs/queues.md, "High-contention pops").
//
// A staged pop registers a request (ordered by its commit versionstamp), then either waits on a
// watch of its own slot or, holding the fulfiller lease, fulfils batches (Fulfiller) until its own
// request is answered, and finally consumes its slot in a transaction of its own (so a delivery
// can never be both consumed and put back).
//
// A request may ask for several items (pop_many: a combined group of pops stages as one request,
// so a group costs one registration, one wait and one consuming transaction, not one per pop).
//
// Every way out withdraws the request: a timeout withdraws it, or returns the items already
// delivered; an error (any exception) withdraws it and puts already delivered items back at their
// keys, in one transaction, best effort, then rethrows. A popper that dies without either leaves a
// request that the next fulfiller expires after HighContentionOptions::request_ttl, and items
// delivered to it go back to the queue then too.
#ifndef KVQ_SRC_LAYERS_CONTENTION_STAGED_POP_H_
#define KVQ_SRC_LAYERS_CONTENTION_STAGED_POP_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvq/database.h"
#include "kvq/queue.h"
#include "kvq/subspace.h"
#include "layers/contention/control.h"
#include "layers/contention/fulfiller.h"
#include "layers/contention/markers.h"

namespace kvq::contention {

class StagedPops {
 public:
  using Clock = std::chrono::steady_clock;

  // Requests under `control` (subspace + ("kvq",)) of the structure whose items are `items`.
  // `markers`: the structure's idempotency markers (they must outlive this object), with which
  // every transaction of a staged pop learns after commit_unknown_result whether it took effect.
  // `refill`, `due` (optional): the fulfiller's (fulfiller.h).
  StagedPops(std::shared_ptr<Database> db, const Subspace& control, ItemRange items,
             HighContentionOptions options, detail::Markers& markers, Refill refill = {},
             DueTimers due = {});
  StagedPops(const StagedPops&) = delete;
  StagedPops& operator=(const StagedPops&) = delete;

  // A pop from `side` behind every waiting one: the item, or nullopt if the queue was empty when
  // its request was answered. Past `deadline` it withdraws its request and throws timed_out
  // (returning instead an item already delivered). On any other error it withdraws its request,
  // puts a delivered item back, and rethrows.
  std::optional<std::string> pop(Side side, Clock::time_point deadline);
  // As pop for `n` (>= 1) pops at once, staged as one request: between 1 and n items in the
  // order n successive pops would take them (fewer when the fulfiller's transaction had room for
  // fewer, or the queue ran out), or none if the queue was empty when the request was answered.
  // Past `deadline`, throws timed_out unless items were already delivered.
  std::vector<std::string> pop_many(Side side, std::int64_t n, Clock::time_point deadline);
  // As pop_many, with each item's key (where it was in the item range) beside its value.
  std::vector<KeyValue> pop_items(Side side, std::int64_t n, Clock::time_point deadline);
  // Answers the waiting requests that fit in `tr` (composed pops and clear()); false if some are
  // left waiting (Fulfiller::serve_all).
  bool serve_all(Transaction& tr) { return fulfiller_.serve_all(tr); }
  // True if pops are waiting: a point read of the waiting-request count (not a scan of the
  // request range), which conflicts with every registration and fulfilment as a read of the
  // whole range would. A new pop must then queue up behind them.
  bool requests_waiting(Transaction& tr);
  // True if a slot older than request_ttl exists (a fulfilment batch would reclaim it).
  // `now_ms`: unix ms (now_ms()).
  bool has_abandoned(Transaction& tr, std::int64_t now_ms) {
    return fulfiller_.has_abandoned(tr, now_ms);
  }
  // The reads of requests_waiting(tr) and has_abandoned(tr, now_ms), which a pop that tries
  // without staging first makes (for Transaction::prefetch).
  std::vector<OwnedRead> fast_pop_reads(std::int64_t now_ms) const {
    return {point_read(keys_.waiting()), fulfiller_.abandoned_read(now_ms, 1)};
  }
  const ControlKeys& keys() const { return keys_; }

 private:
  // How a request ended: `gone` if it vanished unanswered (expired, or its delivery reclaimed,
  // because this popper was slower than request_ttl, or withdrawn after a timeout).
  struct Outcome {
    bool gone = false;
    std::vector<KeyValue> items;
  };
  // What the attempts of one marked transaction of ours took for us, by attempt number (as
  // Markers::write records it): only the attempt whose number the marker holds took effect (the
  // marker may hold a fence instead: then none did).
  struct InHand {
    std::string marker;
    std::map<std::size_t, std::vector<KeyValue>> taken;
    // A new marked transaction, `marker`'s, begins: nothing in hand.
    void begin(std::string new_marker) {
      marker = std::move(new_marker);
      taken.clear();
    }
  };

  // Throws timed_out if the registration could not commit by `deadline` (if it committed
  // unknowingly, the request expires after request_ttl: Fulfiller).
  std::string register_request(Side side, std::int64_t n, Clock::time_point deadline);
  // `in_hand`: what a transaction of ours took (set while it may commit).
  Outcome await(const std::string& me, Clock::time_point deadline, InHand* in_hand);
  void hint_await_reads(Transaction& tr, const std::string& slot);
  bool should_lead(Transaction& tr, const std::string& me, const Slot& s, bool* waited,
                   std::int64_t* wait_ms);
  static std::string next_after(const std::vector<std::string>& ids, const std::string& holder);
  std::optional<Outcome> lead(const std::string& me, Clock::time_point deadline, InHand* in_hand);
  void wait_on_slot(Transaction& tr, const std::string& slot, std::int64_t wait_ms,
                    Clock::time_point deadline);
  Outcome settle(Transaction& first, const std::string& me, Slot read, bool withdraw_waiting,
                 InHand* in_hand);
  void take_delivered(Transaction& tr, const std::string& me, Slot* s);
  void withdraw(Transaction& tr, const std::string& me, const Slot& s);
  void abandon(const std::string& me, const InHand& in_hand) noexcept;

  std::shared_ptr<Database> db_;
  ControlKeys keys_;
  HighContentionOptions options_;
  detail::Markers& markers_;
  bool hint_reads_;      // db_->reads_take_round_trips(): prefetch what a wait and a batch read
  Fulfiller fulfiller_;  // refers to keys_
};

}  // namespace kvq::contention

#endif  // KVQ_SRC_LAYERS_CONTENTION_STAGED_POP_H_
