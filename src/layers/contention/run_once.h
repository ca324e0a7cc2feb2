// Internal: the one retry loop of the layers that is safe under commit_unknown_result.
//
// run_once(db, body, committed) runs body(tr) and commits, retrying retryable errors with
// Transaction::on_error (so TransactionOptions' timeout and retry_limit apply). After an attempt
// failed with commit_unknown_result, every later attempt first asks committed(tr) whether that
// attempt took effect (a marker key it wrote is there, a slot it cleared is gone, ...): if so, the
// result that attempt computed is returned instead of running body again. The identity committed()
// looks for must be chosen by the caller outside the loop.
//
// Example:
//   const std::string marker = markers.make();
//   auto v = run_once(db, [&](Transaction& tr) { tr.set(marker, ""); return pop(tr); },
//                     [&](Transaction& tr) { return tr.get(marker).has_value(); });
#ifndef KVQ_SRC_LAYERS_CONTENTION_RUN_ONCE_H_
#define KVQ_SRC_LAYERS_CONTENTION_RUN_ONCE_H_

#include <optional>
#include <type_traits>
#include <utility>

#include "kvq/database.h"
#include "kvq/error.h"

namespace kvq::contention {

// Returns body's result (body must return a value). Throws what on_error rethrows: non-retryable
// errors, and retryable ones once options' retry_limit or timeout is used up.
template <typename Body, typename Committed>
auto run_once(Database& db, Body&& body, Committed&& committed,
              const TransactionOptions& options = {}) -> std::invoke_result_t<Body&, Transaction&> {
  using R = std::invoke_result_t<Body&, Transaction&>;
  Transaction tr = db.create_transaction(options);
  std::optional<R> maybe_result;  // what the last maybe-committed attempt computed
  for (;;) {
    std::optional<R> attempt;
    try {
      if (maybe_result && committed(tr)) return std::move(*maybe_result);
      attempt.emplace(body(tr));
      tr.commit();
      return std::move(*attempt);
    } catch (const Error& e) {
      if (e.maybe_committed() && attempt) maybe_result = std::move(attempt);
      tr.on_error(e);
    }
  }
}

}  // namespace kvq::contention

#endif  // KVQ_SRC_LAYERS_CONTENTION_RUN_ONCE_H_
