// Internal: batches of pops and takes cut to the engine's limits (docs/queues.md, "Batches"): the
// read at one end of an item range that ItemStore's pop and take batches and FairQueue's tenant
// pops (fair/tenant_items.h) share, and the room a batch keeps in its transaction.
#ifndef KVQ_SRC_LAYERS_FITTING_H_
#define KVQ_SRC_LAYERS_FITTING_H_

#include <cstddef>
#include <functional>

#include "kvq/database.h"
#include "layers/contention/control.h"

namespace kvq::detail {

// Room kept in a batch's transaction for what the layer adds after the items: the size counter,
// the idempotency marker (a write and a read conflict) and the finished markers it clears
// (markers.h: up to 16), a sweep.
constexpr std::size_t kReserveOperations = 24;
constexpr std::size_t kReserveBytes = 8192;

// What a batch that consumes fewer items than asked for (and at least one) tells of the rest.
enum class ShortBatch {
  // That there were no more: the read-conflict range runs to the far end of the items, so a push
  // committed meanwhile makes the batch conflict. For callers that answer "no more" (pop_batch,
  // take_batch: "fewer if the queue holds fewer").
  kMeansNoMore,
  // Nothing: the read-conflict range ends at the last item consumed, exactly as for that many
  // single pops, so pushes committed meanwhile do not conflict. For a combined group's batches
  // (combining/batches.h), which serve the pops left over in a next batch, whose read tells
  // whether the queue is empty (a batch that consumes none reads to the end in either case).
  kSaysNothing,
};

// What consume writes of each item's value: nothing (a pop clears the item), or the value (a take
// writes it into the lease's timer), so that a larger item costs more.
enum class ItemWrites { kKeyOnly, kValueToo };

// Calls consume(kv) on up to `n` items from `side` of `items` (consume clears or moves each) and
// takes them off the size counter (contention::add_size); returns how many. Consumes the first
// item, measures what it added to the transaction (Transaction::usage(): bytes, and on etcd the
// compares of the read and the writes of consume), and consumes as many more (up to n in all) as
// `limits` leave room for; with ItemWrites::kValueToo, an item larger than the first counts as
// costing more by a multiple of the bytes it has over the first. Reads only what it consumes
// (contention::read_end), so the read-conflict range (which etcd counts per record) covers those
// items and, if it ran short, what `short_batch` says. Due timers are the caller's
// (WorkItems::release_due first).
std::size_t consume_fitting(Transaction& tr, const contention::ItemRange& items,
                            const TransactionLimits& limits, contention::Side side, std::size_t n,
                            ShortBatch short_batch, ItemWrites writes,
                            const std::function<void(KeyValue&)>& consume);

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_FITTING_H_
