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
#include <span>
#include <string_view>

#include "kvq/database.h"
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

// A bound on a wait's sleep when a ready item was visible to the transaction that armed its
// watches but attempts found none twice in a row (an item an attempt cannot take, e.g. one being
// put back): waiting on the watches alone could then sleep until the next push, retrying at once
// would spin.
inline constexpr std::chrono::milliseconds kRecheck{5};

// Counts the arming transactions in a row that saw a ready item after an attempt found none, and
// tells how long the wait may sleep on its watches: not at all the first time (the item came
// between the attempt and the arming: try again), at most kRecheck after that, as long as `left`
// when none was seen.
class VisibleStreak {
 public:
  // Notes what the latest arming transaction saw; returns the bound on the sleep that follows.
  std::chrono::milliseconds next(bool item_visible, std::chrono::milliseconds left) {
    in_a_row_ = item_visible ? in_a_row_ + 1 : 0;
    if (in_a_row_ == 1) return std::chrono::milliseconds(0);
    return in_a_row_ > 1 ? std::min(left, kRecheck) : left;
  }

 private:
  int in_a_row_ = 0;
};

// Sleeps until one of `watches` fires or `bound` passes, then cancels them all (freeing the
// engine's streams). A watch that failed with a retryable error (etcd: its start revision was
// compacted while its stream reconnected) ends the sleep as a firing would: the wait looks again
// and re-arms. Other errors (connection_failed) are thrown.
void sleep_on(std::span<Watch> watches, std::chrono::milliseconds bound);

}  // namespace kvq::detail

#endif  // KVQ_LAYERS_WAITING_H_
