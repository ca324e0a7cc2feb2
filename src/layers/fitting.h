// Internal: batches of pops and takes cut to the engine's limits (docs/queues.md, "Batches"): the
// read at one end of an item range that ItemStore's pop and take batches and FairQueue's tenant
// pops (fair/tenant_pops.h) share, and the room a batch keeps in its transaction.
#ifndef KVQ_SRC_LAYERS_FITTING_H_
#define KVQ_SRC_LAYERS_FITTING_H_

#include <cstddef>
#include <functional>

#include "kvq/database.h"
#include "layers/contention/control.h"

namespace kvq::detail {

// Room kept in a batch's transaction for what the layer adds after the items: the size counter,
// the idempotency marker and the finished markers it clears (markers.h: up to 16), a sweep.
constexpr std::size_t kReserveOperations = 24;
constexpr std::size_t kReserveBytes = 8192;

// Calls consume(kv) on up to `n` items from `side` of `items` (consume clears or moves each) and
// takes them off the size counter (contention::add_size); returns how many. Consumes the first
// item, measures what it added to the transaction (Transaction::usage(): bytes, and on etcd the
// compares of the read and the writes of consume), and consumes as many more (up to n in all) as
// `limits` leave room for. Reads only what it consumes (non-snapshot, contention::read_end), so
// the read-conflict range (which etcd counts per record) covers exactly those items. Due timers
// are the caller's (WorkItems::release_due first).
std::size_t consume_fitting(Transaction& tr, const contention::ItemRange& items,
                            const TransactionLimits& limits, contention::Side side, std::size_t n,
                            const std::function<void(KeyValue&)>& consume);

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_FITTING_H_
