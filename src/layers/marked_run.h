// Internal: a layer operation with its own retry loop, safe under commit_unknown_result through
// an idempotency marker (markers.h): body(tr) runs in contention::run_once, the marker is written
// in the same transaction, and a retry after an unknown result returns the earlier attempt's
// result if its marker is there. Used by ItemStore (push, pop) and WorkItems (take, ack, ...).
//
// Example:
//   auto v = run_marked(db, markers, [&](Transaction& tr) { return pop(tr); });
#ifndef KVQ_SRC_LAYERS_MARKED_RUN_H_
#define KVQ_SRC_LAYERS_MARKED_RUN_H_

#include <string>
#include <vector>

#include "kvq/database.h"
#include "layers/contention/run_once.h"
#include "layers/markers.h"

namespace kvq::detail {

// Returns body's result (body must return a value); throws what run_once throws.
template <typename Body>
auto run_marked(Database& db, Markers& markers, Body&& body,
                const TransactionOptions& options = {}) {
  const std::string marker = markers.make();
  std::vector<std::string> cleared;
  auto result = contention::run_once(
      db,
      [&](Transaction& tr) {
        auto r = body(tr);
        cleared = markers.write(tr, marker);
        return r;
      },
      [&](Transaction& tr) { return tr.get(marker).has_value(); }, options,
      markers.resolve_window());
  markers.finished(marker, cleared);
  return result;
}

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_MARKED_RUN_H_
