// Internal: the one retry loop of the layers that is safe under commit_unknown_result.
//
// run_once(db, body, committed) runs body(tr) and commits, retrying retryable errors with
// Transaction::on_error (so TransactionOptions' timeout and retry_limit apply). After an attempt
// failed with commit_unknown_result, every later attempt first asks committed(tr) whether that
// attempt took effect (a marker key it wrote is there, a slot it cleared is gone, ...): if so, the
// result that attempt computed is returned instead of running body again. The identity committed()
// looks for must be chosen by the caller outside the loop.
//
// Giving up (a non-retryable error, the timeout or retry limit used up) while such an attempt is
// still unresolved would throw away a result that may have committed (a popped item nobody gets).
// So run_once first keeps asking committed(), in fresh transactions with back-off, for up to
// `resolve_for`: if the attempt took effect its result is returned, otherwise the error is thrown.
// `resolve_for` must be shorter than the time committed()'s evidence is reliable (markers:
// marker_ttl; slots: until another client may clear them). 0 (the default) does not resolve.
//
// Example:
//   const std::string marker = markers.make();
//   auto v = run_once(db, [&](Transaction& tr) { tr.set(marker, ""); return pop(tr); },
//                     [&](Transaction& tr) { return tr.get(marker).has_value(); });
#ifndef KVQ_SRC_LAYERS_CONTENTION_RUN_ONCE_H_
#define KVQ_SRC_LAYERS_CONTENTION_RUN_ONCE_H_

#include <algorithm>
#include <chrono>
#include <optional>
#include <type_traits>
#include <utility>

#include "common/clock.h"
#include "kvq/database.h"
#include "kvq/error.h"

namespace kvq::contention {

// Whether an attempt that ended in commit_unknown_result took effect, asked with committed() in
// fresh transactions until `until`; nullopt if the engine did not answer in time.
template <typename Committed>
std::optional<bool> resolve_unknown(Database& db, Committed& committed,
                                    std::chrono::steady_clock::time_point until) {
  auto delay = std::chrono::milliseconds(20);
  for (;;) {
    try {
      Transaction tr = db.create_transaction();
      return static_cast<bool>(committed(tr));
    } catch (const Error&) {
      if (common::clock().steady_now() + delay >= until) return std::nullopt;
      common::clock().sleep_for(delay);
      delay = std::min(delay * 2, std::chrono::milliseconds(500));
    }
  }
}

// As run_once below, with `tr` as the first attempt's transaction: what the caller read in it
// stays read (its reads' conflicts included), so body's first attempt may use those reads instead
// of making them again. Later attempts run in `tr` after on_error (reset, as always).
template <typename Body, typename Committed>
auto run_once_in(Transaction& tr, Database& db, Body&& body, Committed&& committed,
                 std::chrono::milliseconds resolve_for = std::chrono::milliseconds(0))
    -> std::invoke_result_t<Body&, Transaction&> {
  using R = std::invoke_result_t<Body&, Transaction&>;
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
      try {
        tr.on_error(e);
      } catch (const Error&) {
        if (!maybe_result || resolve_for.count() <= 0) throw;
        const auto until = common::clock().steady_now() + resolve_for;
        if (resolve_unknown(db, committed, until).value_or(false)) return std::move(*maybe_result);
        throw;
      }
    }
  }
}

// Returns body's result (body must return a value). Throws what on_error rethrows: non-retryable
// errors, and retryable ones once options' retry_limit or timeout is used up (after resolving an
// unknown result, see the file comment).
template <typename Body, typename Committed>
auto run_once(Database& db, Body&& body, Committed&& committed,
              const TransactionOptions& options = {},
              std::chrono::milliseconds resolve_for = std::chrono::milliseconds(0))
    -> std::invoke_result_t<Body&, Transaction&> {
  Transaction tr = db.create_transaction(options);
  return run_once_in(tr, db, std::forward<Body>(body), std::forward<Committed>(committed),
                     resolve_for);
}

}  // namespace kvq::contention

#endif  // KVQ_SRC_LAYERS_CONTENTION_RUN_ONCE_H_
