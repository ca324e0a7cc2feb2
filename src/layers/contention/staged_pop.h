// Internal: high-contention pops that queue up (docs/queues.md, "High-contention pops").
//
// A staged pop registers a request (ordered by its commit versionstamp), then either waits on a
// watch of its own slot or, holding the fulfiller lease, fulfils batches (Fulfiller) until its own
// request is answered, and finally consumes its slot in a transaction of its own (so a delivery
// can never be both consumed and put back).
//
// Every way out withdraws the request: a timeout withdraws it, or returns the item already
// delivered; an error (any exception) withdraws it and puts an already delivered item back at its
// key, in one transaction, best effort, then rethrows. A popper that dies without either leaves a
// request that the next fulfiller expires after HighContentionOptions::request_ttl, and an item
// delivered to it goes back to the queue then too.
#ifndef KVQ_SRC_LAYERS_CONTENTION_STAGED_POP_H_
#define KVQ_SRC_LAYERS_CONTENTION_STAGED_POP_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "kvq/database.h"
#include "kvq/queue.h"
#include "kvq/subspace.h"
#include "layers/contention/control.h"
#include "layers/contention/fulfiller.h"

namespace kvq::contention {

class StagedPops {
 public:
  using Clock = std::chrono::steady_clock;

  // Requests under `control` (subspace + ("kvq",)) of the structure whose items are `items`.
  StagedPops(std::shared_ptr<Database> db, const Subspace& control, ItemRange items,
             HighContentionOptions options);
  StagedPops(const StagedPops&) = delete;
  StagedPops& operator=(const StagedPops&) = delete;

  // A pop from `side` behind every waiting one: the item, or nullopt if the queue was empty when
  // its request was answered. Past `deadline` it withdraws its request and throws timed_out
  // (returning instead an item already delivered). On any other error it withdraws its request,
  // puts a delivered item back, and rethrows.
  std::optional<std::string> pop(Side side, Clock::time_point deadline);
  // Answers the waiting requests that fit in `tr` (composed pops and clear()).
  void serve_all(Transaction& tr) { fulfiller_.serve_all(tr); }
  // True if a slot older than request_ttl exists (a fulfilment batch would reclaim it).
  bool has_abandoned(Transaction& tr) { return fulfiller_.has_abandoned(tr); }
  const ControlKeys& keys() const { return keys_; }

 private:
  // How a request ended: `gone` if it vanished unanswered (expired, or its delivery reclaimed,
  // because this popper was slower than request_ttl, or withdrawn after a timeout).
  struct Outcome {
    bool gone = false;
    std::optional<std::string> value;
  };

  std::string register_request(Side side);
  // `in_hand`: the item a consuming transaction read from our slot (set while it may commit).
  Outcome await(const std::string& me, Clock::time_point deadline,
                std::optional<KeyValue>* in_hand);
  bool should_lead(Transaction& tr, const std::string& me, const Slot& s, bool* waited,
                   std::int64_t* wait_ms);
  std::optional<Outcome> lead(const std::string& me, Clock::time_point deadline);
  void wait_on_slot(Transaction& tr, const std::string& slot, std::int64_t wait_ms,
                    Clock::time_point deadline);
  Outcome settle(const std::string& me, bool withdraw_waiting, std::optional<KeyValue>* in_hand);
  void withdraw(Transaction& tr, const std::string& me, const Slot& s);
  std::chrono::milliseconds slot_evidence_left(const std::string& me) const;
  void abandon(const std::string& me, const std::optional<KeyValue>& in_hand) noexcept;

  std::shared_ptr<Database> db_;
  ControlKeys keys_;
  HighContentionOptions options_;
  Fulfiller fulfiller_;  // refers to keys_
};

}  // namespace kvq::contention

#endif  // KVQ_SRC_LAYERS_CONTENTION_STAGED_POP_H_
