// Internal: the one retry loop of the layers that is safe under commit_unknown_result.
//
// run_once(db, body, committed) runs body(tr) and commits, retrying retryable errors with
// Transaction::on_error (so TransactionOptions' timeout and retry_limit apply). After an attempt
// failed with commit_unknown_result, every later attempt first asks committed(tr, k) whether that
// attempt, the k-th call of body (from 0), took effect (a marker key it wrote holds k, a slot it
// cleared is gone, ...): if so, the result that attempt computed is returned instead of running
// body again. Several attempts can be in doubt at once (one ended unknown, was not yet visible
// to the next, which ended unknown too): they are asked about oldest first, and at most one of
// them can have committed if each attempt reads what committed() looks for with a conflict. A
// committed() that cannot tell attempts apart may ignore k only if all attempts compute the same
// result. The identity committed() looks for must be chosen by the caller outside the loop.
//
// Giving up (a non-retryable error, the timeout or retry limit used up) while such an attempt is
// still unresolved would throw away a result that may have committed (a popped item nobody gets).
// So run_once first keeps asking committed(), in fresh transactions with back-off, for up to
// `resolve_for`: if the attempt took effect its result is returned; otherwise the transaction
// that found none commits fence(tr) (which must conflict with every attempt in doubt: the
// marker's write, read with a conflict), so none can land later, and the error is thrown.
// `resolve_for` must be shorter than the time committed()'s evidence is reliable (markers:
// marker_ttl; slots: until another client may clear them). 0 (the default) does not resolve.
//
// Example (`calls` counts the calls of body, as run_once does):
//   const std::string marker = markers.make();
//   std::size_t calls = 0;
//   auto pop_marked = [&](Transaction& tr) {
//     tr.add_read_conflict_key(marker);  // of two attempts, at most one commits
//     tr.set(marker, std::to_string(calls++));
//     return pop(tr);
//   };
//   auto took_effect = [&](Transaction& tr, std::size_t k) {
//     return tr.get(marker) == std::to_string(k);
//   };
//   auto v = run_once(db, pop_marked, took_effect);
#ifndef KVQ_SRC_LAYERS_CONTENTION_RUN_ONCE_H_
#define KVQ_SRC_LAYERS_CONTENTION_RUN_ONCE_H_

#include <algorithm>
#include <chrono>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "kvq/database.h"
#include "kvq/error.h"

namespace kvq::contention {

// The results of the attempts whose commit is in doubt, oldest first, and which of them took
// effect as a transaction reads it.
template <typename R>
struct InDoubt {
  std::vector<std::pair<std::size_t, R>> attempts;  // (call of body, its result)

  // The result of the attempt that took effect as `tr` reads it (committed(tr, k)), or nullptr.
  template <typename Committed>
  R* committed_one(Transaction& tr, Committed& committed) {
    for (auto& [k, result] : attempts) {
      if (committed(tr, k)) return &result;
    }
    return nullptr;
  }
};

// Writes nothing: for a run_once whose attempts all compute the same result, where an attempt in
// doubt landing after the loop gave up loses nothing.
struct NoFence {
  void operator()(Transaction&) const {}
};

// Which attempt in doubt took effect, asked in fresh transactions until `until`: its result, or a
// null pointer if none did and none can any more (the transaction that found none committed
// fence(tr), which conflicts with every attempt in doubt), nullopt if the engine did not answer
// in time.
template <typename R, typename Committed, typename Fence>
std::optional<R*> resolve_unknown(Database& db, InDoubt<R>& in_doubt, Committed& committed,
                                  Fence& fence, std::chrono::steady_clock::time_point until) {
  auto delay = std::chrono::milliseconds(20);
  for (;;) {
    try {
      Transaction tr = db.create_transaction();
      if (R* done = in_doubt.committed_one(tr, committed)) return done;
      fence(tr);
      tr.commit();
      return nullptr;
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
template <typename Body, typename Committed, typename Fence = NoFence>
auto run_once_in(Transaction& tr, Database& db, Body&& body, Committed&& committed,
                 std::chrono::milliseconds resolve_for = std::chrono::milliseconds(0),
                 Fence fence = {}) -> std::invoke_result_t<Body&, Transaction&> {
  using R = std::invoke_result_t<Body&, Transaction&>;
  InDoubt<R> in_doubt;
  for (std::size_t calls = 0;;) {
    std::optional<R> attempt;
    const std::size_t k = calls;
    try {
      if (R* done = in_doubt.committed_one(tr, committed)) return std::move(*done);
      ++calls;
      attempt.emplace(body(tr));
      tr.commit();
      return std::move(*attempt);
    } catch (const Error& e) {
      if (e.maybe_committed() && attempt) in_doubt.attempts.emplace_back(k, std::move(*attempt));
      try {
        tr.on_error(e);
      } catch (const Error&) {
        if (in_doubt.attempts.empty() || resolve_for.count() <= 0) throw;
        const auto until = common::clock().steady_now() + resolve_for;
        if (R* done = resolve_unknown(db, in_doubt, committed, fence, until).value_or(nullptr)) {
          return std::move(*done);
        }
        throw;
      }
    }
  }
}

// Returns body's result (body must return a value). Throws what on_error rethrows: non-retryable
// errors, and retryable ones once options' retry_limit or timeout is used up (after resolving an
// unknown result, see the file comment).
template <typename Body, typename Committed, typename Fence = NoFence>
auto run_once(Database& db, Body&& body, Committed&& committed,
              const TransactionOptions& options = {},
              std::chrono::milliseconds resolve_for = std::chrono::milliseconds(0),
              Fence fence = {}) -> std::invoke_result_t<Body&, Transaction&> {
  Transaction tr = db.create_transaction(options);
  return run_once_in(tr, db, std::forward<Body>(body), std::forward<Committed>(committed),
                     resolve_for, std::move(fence));
}

}  // namespace kvq::contention

#endif  // KVQ_SRC_LAYERS_CONTENTION_RUN_ONCE_H_
