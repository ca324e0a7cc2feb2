// What the blocking waits of ItemStore (waiting.cc) and FairState (fair/fair_state.cc) share:
// how long each attempt of a wait may take, and how a wait whose attempts could not finish in
// time ends. A wait returns nullopt only when its last attempt found nothing ready; when the time
// ran out because attempts kept failing (commits refused, a high-contention pop not answered), it
// throws timed_out naming the last failure: "nothing came" and "could not look" are different
// answers.
#ifndef KVQ_LAYERS_WAITING_H_
#define KVQ_LAYERS_WAITING_H_

#include <algorithm>
#include <chrono>
#include <limits>
#include <string_view>

#include "kvq/error.h"

namespace kvq::detail {

// The least time an attempt of a wait gets, however little of the wait is left: a remote engine
// needs a few round trips for one pop, and pop_wait(0) means "one try, no waiting", not "no time
// at all". So a wait may end up to this long after its timeout.
inline constexpr std::chrono::milliseconds kWaitAttemptFloor{1000};

// The longest transaction timeout there is (TransactionOptions::timeout, FoundationDB's range).
inline constexpr std::chrono::milliseconds kLongestAttempt{std::numeric_limits<int>::max()};

// How long the next attempt of a wait with `left` of its time left may take (a wait without end,
// or of more than 24 days, gives its attempts kLongestAttempt each).
inline std::chrono::milliseconds attempt_budget(std::chrono::milliseconds left) {
  return std::clamp(left, kWaitAttemptFloor, kLongestAttempt);
}

// Throws timed_out for the wait named `wait` (e.g. "queue: pop_wait") of `timeout` whose last
// attempt ran out of time with `cause` (timed_out or transaction_timed_out).
[[noreturn]] void throw_attempts_timed_out(std::string_view wait, std::chrono::milliseconds timeout,
                                           const Error& cause);

// Returns attempt(), one attempt of the wait named `wait` of `timeout`; if the attempt ran out of
// its time (timed_out or transaction_timed_out), calls throw_attempts_timed_out instead.
template <typename Attempt>
auto run_wait_attempt(std::string_view wait, std::chrono::milliseconds timeout, Attempt&& attempt) {
  try {
    return attempt();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kTimedOut && e.code() != ErrorCode::kTransactionTimedOut) throw;
    throw_attempts_timed_out(wait, timeout, e);
  }
}

}  // namespace kvq::detail

#endif  // KVQ_LAYERS_WAITING_H_
