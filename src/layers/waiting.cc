// ItemStore's blocking waits (item_store.h, "blocking waits"): pop_wait. A pop that finds the
// queue empty arms a watch on the size counter in a transaction that saw no item, and blocks on
// it. Every push writes the size counter (atomic_add), so the first push after that transaction's
// read version fires the watch; a push that came between the failed pop and the watch's
// transaction is seen by that transaction (an item is there), and the pop is tried again at once.
// No polling. docs/queues.md, "Blocking waits".
#include <thread>

#include "kvq/error.h"
#include "layers/item_store.h"

namespace kvq::detail {
namespace {

using Clock = std::chrono::steady_clock;

// A bound on the wait when an item is visible but pops found none twice in a row (an item a pop
// cannot take, e.g. one being put back): waiting on the watch alone could then sleep until the
// next push, retrying at once would spin.
constexpr std::chrono::milliseconds kRecheck{5};
// The least time a pop attempt gets, however little of the wait is left: a remote engine needs a
// few round trips for one pop, and pop_wait(0) means "one try, no waiting", not "no time at all".
constexpr std::chrono::milliseconds kPopAttemptFloor{1000};

std::chrono::milliseconds left(Clock::time_point deadline) {
  const auto d = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return d.count() > 0 ? d : std::chrono::milliseconds(0);
}

// A watch of the size counter and whether an item was visible when it was armed.
struct Armed {
  Watch watch;
  bool item_visible = false;
};

}  // namespace

std::optional<std::string> ItemStore::pop_wait(Side side, std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) {
    throw Error(ErrorCode::kInvalidOptionValue, "queue: pop_wait timeout must be >= 0");
  }
  const auto deadline = Clock::now() + timeout;
  int visible_in_a_row = 0;
  for (;;) {
    // Combined pops take no timeout (they are quick); the others are bounded by the deadline.
    const auto pop_timeout =
        combined_ ? std::chrono::milliseconds(0) : std::max(left(deadline), kPopAttemptFloor);
    try {
      if (auto v = pop(side, pop_timeout)) return v;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kTimedOut) throw;
      return std::nullopt;
    }
    if (left(deadline).count() == 0) return std::nullopt;
    Armed armed = db_->run([&](Transaction& tr) {
      const bool visible = end_item(tr, side, /*snapshot=*/true).has_value();
      return Armed{tr.watch(items_.size_key), visible};
    });
    visible_in_a_row = armed.item_visible ? visible_in_a_row + 1 : 0;
    if (visible_in_a_row != 1) {
      const auto wait = visible_in_a_row == 0 ? left(deadline) : std::min(left(deadline), kRecheck);
      armed.watch.wait_for(wait);
    }
    armed.watch.cancel();  // (no effect once fired; frees the engine's stream otherwise)
  }
}

}  // namespace kvq::detail
