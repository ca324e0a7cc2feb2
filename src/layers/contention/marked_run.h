// Internal: a layer operation with its own retry loop, safe under commit_unknown_result through
// an idempotency marker (markers.h): body(tr) runs in contention::run_once, the marker is written
// in the same transaction, and a retry after an unknown result returns the earlier attempt's
// result if its marker is there. Used by ItemStore (push, pop), WorkItems (take, ack, ...) and
// StagedPops (a waiting pop consuming its delivery, fulfilment batches, withdrawals).
//
// Example:
//   auto v = run_marked(db, markers, [&](Transaction& tr) { return pop(tr); });
#ifndef KVQ_SRC_LAYERS_CONTENTION_MARKED_RUN_H_
#define KVQ_SRC_LAYERS_CONTENTION_MARKED_RUN_H_

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kvq/database.h"
#include "layers/contention/markers.h"
#include "layers/contention/run_once.h"

namespace kvq::detail {

// How run_marked_in marks its attempts.
struct MarkOptions {
  // Whether giving up after commit_unknown_result first asks the marker for
  // markers.resolve_window() (run_once's resolve_for), or throws at once.
  bool resolve = true;
  // Finished markers an attempt clears at most (a batch sized to the engine keeps room for few).
  std::size_t max_clears = Markers::kClearPerWrite;
};

// As run_marked below, with `tr` as the first attempt's transaction (run_once_in: what the caller
// read in it stays read) and `marker` (from markers.make()) chosen by the caller, who may later
// read it to learn whether an attempt that ended in an error took effect. An attempt writes the
// marker if it wrote something and marked(its result) (false: the caller knows the attempt wrote
// nothing worth telling; an attempt that wrote nothing commits nothing, so it cannot end in
// commit_unknown_result), and always once an earlier attempt is in doubt: its commit is then a
// fence (Markers::write), after which no attempt in doubt can still land, so returning this
// attempt's result (even "nothing was done") loses nothing.
template <typename Body, typename Marked>
auto run_marked_in(Transaction& tr, Database& db, Markers& markers, const std::string& marker,
                   Body&& body, Marked&& marked, const MarkOptions& options = {}) {
  std::vector<std::string> cleared;
  bool wrote_marker = false;  // by the attempt that committed
  std::size_t calls = 0;      // of body, as run_once_in counts them
  bool in_doubt = false;      // an attempt ended in commit_unknown_result (committed() was asked)
  auto result = contention::run_once_in(
      tr, db,
      [&](Transaction& attempt) {
        const std::size_t k = calls++;
        auto r = body(attempt);
        cleared.clear();
        wrote_marker = in_doubt || (attempt.has_writes() && marked(std::as_const(r)));
        if (wrote_marker) cleared = markers.write(attempt, marker, k, options.max_clears);
        return r;
      },
      [&](Transaction& check, std::size_t k) {
        in_doubt = true;
        return Markers::written_by(check, marker, k);
      },
      options.resolve ? markers.resolve_window() : std::chrono::milliseconds(0),
      [&](Transaction& fence) { markers.write(fence, marker, Markers::kFence, 0); });
  if (wrote_marker) markers.finished(marker, cleared);
  return result;
}

// Returns body's result (body must return a value); throws what run_once throws.
template <typename Body>
auto run_marked(Database& db, Markers& markers, Body&& body,
                const TransactionOptions& options = {}) {
  Transaction tr = db.create_transaction(options);
  return run_marked_in(tr, db, markers, markers.make(), std::forward<Body>(body),
                       [](const auto&) { return true; });
}

// One attempt at body(tr), which returns a std::optional: its result, or nullopt if body declined
// (returned nullopt: what it wrote is committed, with no marker, so it must carry no result, as
// moving due timers does) or the attempt failed to commit (a conflict is not retried). An attempt
// that wrote nothing writes no marker either: its commit is read-only (no round trip on etcd)
// and cannot end in commit_unknown_result. After commit_unknown_result the marker tells whether the
// attempt took effect, and if it has not (yet), a fence (run_marked_in) makes sure it never will
// before nullopt is returned. The fast path of high-contention pops: on nullopt the caller queues
// up instead.
template <typename Body>
auto try_marked_once(Database& db, Markers& markers, Body&& body) {
  using Out = std::invoke_result_t<Body&, Transaction&>;
  const std::string marker = markers.make();
  std::vector<std::string> cleared;
  bool wrote_marker = false;  // by the attempt that committed
  std::size_t calls = 0;
  bool in_doubt = false;
  Out out = contention::run_once(
      db,
      [&](Transaction& tr) -> Out {
        const std::size_t k = calls++;
        Out r = k == 0 ? body(tr) : std::nullopt;
        // An attempt that wrote nothing commits nothing (no round trip): no marker to tell of it.
        wrote_marker = (r.has_value() && tr.has_writes()) || in_doubt;
        if (wrote_marker) cleared = markers.write(tr, marker, k);
        return r;
      },
      [&](Transaction& tr, std::size_t k) {
        in_doubt = true;
        return Markers::written_by(tr, marker, k);
      },
      {}, markers.resolve_window(),
      [&](Transaction& fence) { markers.write(fence, marker, Markers::kFence, 0); });
  if (wrote_marker) markers.finished(marker, cleared);
  return out;
}

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_CONTENTION_MARKED_RUN_H_
