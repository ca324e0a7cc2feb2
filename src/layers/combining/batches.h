// Internal: serving a Combiner group in batches bounded by its requests' deadlines
// (Request::deadline), for the combined pops of Queue, PriorityQueue and FairQueue. A pop that
// waits with a timeout (pop_wait, pop(timeout)) may share a group with pops that wait for ever;
// under commits that keep failing, each must end at its own deadline and no thread may go on
// serving past its own.
#ifndef KVQ_SRC_LAYERS_COMBINING_BATCHES_H_
#define KVQ_SRC_LAYERS_COMBINING_BATCHES_H_

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "common/clock.h"
#include "layers/combining/combiner.h"

namespace kvq::combining {

// Answers the first requests of `pending` (writing their results) in one transaction that ends by
// `deadline` (SteadyTime::max(): none), throwing timed_out or transaction_timed_out if it cannot;
// returns how many it answered, 0 if it can answer none (the queue is empty: the rest keep their
// empty results).
using Batch =
    std::function<std::size_t(std::span<Request* const> pending, common::SteadyTime deadline)>;

// Serves `group` (a Combiner serve's argument) in order by calling `batch` on the requests not
// answered yet, each time with the earliest deadline of the group (of those answered too, whose
// threads wait for the serve to end), until all are answered or a batch answers none. When a
// batch runs out of time, the requests whose deadlines have passed fail with its error and the
// others are deferred (Request::defer) to the next group: the serve ends, so the thread leading
// it, whose own deadline may have passed, returns, and so do those answered already. Any other
// error (or a timeout with no deadline passed) fails the requests not answered yet; it propagates
// to the whole group if none was answered.
void serve_in_batches(const std::vector<Request*>& group, const Batch& batch);

}  // namespace kvq::combining

#endif  // KVQ_SRC_LAYERS_COMBINING_BATCHES_H_
