// Internal: the machinery Queue and PriorityQueue share. Both keep items at keys of the form
// subspace + (int, ...) and control keys under subspace + ("kvq", ...); a Queue is the one-sided
// case (front only) of a double-ended priority queue whose first key element is the push index.
// docs/queues.md has the key layout; markers.h the idempotency markers; contention/ the
// high-contention pops. contention_stats() (contention/stats.h) is exported from here.
#ifndef KVQ_SRC_LAYERS_ITEM_STORE_H_
#define KVQ_SRC_LAYERS_ITEM_STORE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kvq/database.h"
#include "kvq/queue.h"
#include "kvq/subspace.h"
#include "layers/contention/control.h"
#include "layers/contention/staged_pop.h"
#include "layers/contention/stats.h"
#include "layers/markers.h"
#include "layers/work_items.h"

namespace kvq::detail {

using contention::Side;

class ItemStore {
 public:
  // `prioritized` selects the PriorityQueue layout (priority, count, random); otherwise the Queue
  // layout (index, random). Throws invalid_argument for a null db, invalid_option_value for bad
  // options. Does no I/O.
  ItemStore(std::shared_ptr<Database> db, Subspace subspace, QueueOptions options,
            bool prioritized);

  // Push with its own retry loop and idempotency marker. `priority` is ignored for queues.
  void push(std::string_view value, std::int64_t priority);
  // Push inside `tr` (a new random part; idempotency is the caller's).
  void push(Transaction& tr, std::string_view value, std::int64_t priority);

  // Pop with its own retry loop (high-contention staging if enabled); timeout 0 = none.
  std::optional<std::string> pop(Side side, std::chrono::milliseconds timeout);
  // Pop inside `tr`; in high-contention mode serves waiting requests first.
  std::optional<std::string> pop(Transaction& tr, Side side);
  std::optional<std::string> peek(Transaction& tr, Side side);
  std::int64_t size(Transaction& tr);
  void clear(Transaction& tr);

  const Subspace& subspace() const { return subspace_; }
  Database& db() { return *db_; }
  // Finished idempotency markers this object still has in the store (for tests).
  std::size_t pending_markers() const { return markers_.pending(); }

  // ---- work queues (kvq/lease.h): leases, delayed items, dead letters ----
  WorkItems& work() { return work_; }

 private:
  struct Fast {
    bool staged = false;  // the pop must queue up behind others
    std::optional<std::string> value;
  };
  template <typename Body>
  auto run_marked(Body&& body, const TransactionOptions& options = {});
  std::string item_key(Transaction& tr, std::int64_t priority, const std::string& random);
  std::optional<KeyValue> end_item(Transaction& tr, Side side, bool snapshot);
  std::optional<std::string> pop_plain(Transaction& tr, Side side);
  std::optional<std::string> pop_staged(Side side, std::chrono::milliseconds timeout);
  Fast pop_fast(Side side);

  std::shared_ptr<Database> db_;
  Subspace subspace_;
  Subspace control_;
  QueueOptions options_;
  bool prioritized_;
  contention::ItemRange items_;
  Markers markers_;
  std::unique_ptr<contention::StagedPops> staged_;  // high-contention mode only
  WorkItems work_;  // releases due timers at the start of every pop and peek
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_ITEM_STORE_H_
