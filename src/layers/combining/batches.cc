#include "layers/combining/batches.h"

#include <algorithm>
#include <exception>

#include "kvq/error.h"

namespace kvq::combining {
namespace {

bool ran_out_of_time(const Error& e) {
  return e.code() == ErrorCode::kTimedOut || e.code() == ErrorCode::kTransactionTimedOut;
}

common::SteadyTime earliest_deadline(std::span<Request* const> requests) {
  common::SteadyTime earliest = common::SteadyTime::max();
  for (const Request* r : requests) earliest = std::min(earliest, r->deadline);
  return earliest;
}

// After a batch of `pending` (the requests of `group` not answered yet) ran out of time: fails
// those whose deadlines have passed with `error` and defers the others; false (nothing done) if
// no deadline of the group has passed.
bool expire(std::span<Request* const> group, std::span<Request* const> pending,
            const std::exception_ptr& error) {
  const common::SteadyTime now = common::clock().steady_now();
  if (earliest_deadline(group) > now) return false;
  for (Request* r : pending) {
    if (r->deadline <= now) {
      r->fail(error);
    } else {
      r->defer();
    }
  }
  return true;
}

}  // namespace

void serve_in_batches(const std::vector<Request*>& group, const Batch& batch) {
  // The requests answered already count too: their threads (the leader's among them) wait for
  // the serve to end.
  const common::SteadyTime deadline = earliest_deadline(group);
  std::size_t answered = 0;
  while (answered < group.size()) {
    const std::span<Request* const> pending = std::span(group).subspan(answered);
    try {
      const std::size_t n = batch(pending, deadline);
      if (n == 0) return;
      answered += n;
    } catch (const Error& e) {
      if (ran_out_of_time(e) && expire(group, pending, std::current_exception())) return;
      if (answered == 0) throw;
      for (Request* r : pending) r->fail(std::current_exception());
      return;
    }
  }
}

}  // namespace kvq::combining
