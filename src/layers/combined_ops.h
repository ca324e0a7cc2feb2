// Internal: Queue / PriorityQueue operations combined within one process (QueueOptions::combine).
// Threads pushing to one object at once are served by one push batch (ItemStore::push_batch: one
// transaction, one marker); threads popping one end at once by one pop batch, its items handed out
// in the order the pops were submitted. Pushes, front pops and back pops combine separately, so a
// push group and a pop group can commit at the same time. docs/queues.md, "Combining".
#ifndef KVQ_SRC_LAYERS_COMBINED_OPS_H_
#define KVQ_SRC_LAYERS_COMBINED_OPS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "layers/combining/combiner.h"
#include "layers/contention/control.h"

namespace kvq::detail {

class ItemStore;
struct PushItem;

class CombinedOps {
 public:
  // Combines the operations of `store`, which must outlive this object. Group sizes are bounded
  // by the store's database limits (Database::limits()).
  explicit CombinedOps(ItemStore& store);

  // ItemStore::push(value, priority), served with the pushes of other threads (value checked by
  // the caller). Idempotent under commit_unknown_result as a push batch is.
  void push(std::string_view value, std::int64_t priority);
  // ItemStore::pop(side), served with the pops of other threads from the same side: nullopt if
  // the queue had no item left for this pop. Throws timed_out or transaction_timed_out if its
  // group could not pop by `deadline` (SteadyTime::max(): none); then it removed nothing.
  std::optional<std::string> pop(contention::Side side, common::SteadyTime deadline);

  // Groups served and requests served so far (benchmarks, tests).
  std::size_t groups() const;
  std::size_t requests() const;

 private:
  void serve_pushes(std::vector<combining::Request*>& group);
  // Pushes the items of `requests` (PushRequests) in one batch, or in halves if it is too large;
  // a batch that fails otherwise fails its own requests.
  void push_halving(std::span<combining::Request* const> requests);
  void serve_pops(std::vector<combining::Request*>& group, contention::Side side);
  std::vector<std::string> next_batch(contention::Side side, std::size_t n,
                                      common::SteadyTime deadline);

  ItemStore& store_;
  combining::Combiner pushes_, front_pops_, back_pops_;
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_COMBINED_OPS_H_
