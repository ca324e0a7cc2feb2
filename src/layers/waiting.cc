// ItemStore's blocking waits (item_store.h, "blocking waits"): pop_wait and take_wait, one loop.
// An attempt (a pop, or a take) that finds no item arms a watch on the size counter in a
// transaction that saw no item, and blocks on it. Every push writes the size counter
// (atomic_add), so the first push after that transaction's read version fires the watch; a push
// that came between the failed attempt and the watch's transaction is seen by that transaction (an
// item is there), and the attempt is made again at once. Items also become ready with no push: a
// delayed item coming due, an expired lease coming back (the next pop or take moves them, see
// work_items.h). So the same transaction reads the earliest timer (snapshot) and the sleep ends at
// its due time at the latest; and it watches the delayed-item counter too, which a delayed push or
// a nack with a delay writes during the wait (a new, maybe earlier, timer). No polling.
// docs/queues.md, "Blocking waits".
#include "layers/waiting.h"

#include <array>

#include "common/clock.h"
#include "kvq/error.h"
#include "layers/contention/end_windows.h"
#include "layers/contention/owned_read.h"
#include "layers/item_keys.h"
#include "layers/item_store.h"

namespace kvq::detail {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The least sleep until a timer is due (its due time is on another client's wall clock; a timer
// already due but not yet moved back is retried after this, not at once).
constexpr milliseconds kTimerSlack{1};
// Watches of the size counter and of the delayed-item counter, whether an item was visible when
// they were armed, and the earliest timer's due time (unix us) then.
struct Armed {
  std::array<Watch, 2> watches;
  bool item_visible = false;
  std::optional<std::int64_t> next_due_us;
};

// How long to sleep on `armed`: at most `bound` (VisibleStreak), until the earliest timer's due
// time at the latest.
milliseconds sleep_bound(const Armed& armed, milliseconds bound) {
  milliseconds wait = bound;
  if (armed.next_due_us) {
    const std::int64_t until_due_us = *armed.next_due_us - now_us();
    const milliseconds until_due =
        std::chrono::ceil<milliseconds>(std::chrono::microseconds(until_due_us)) + kTimerSlack;
    wait = std::min(wait, std::max(until_due, kTimerSlack));
  }
  return wait;
}

}  // namespace

void sleep_on(std::span<Watch> watches, milliseconds bound) {
  struct CancelAll {
    std::span<Watch> watches;
    ~CancelAll() {
      for (Watch& w : watches) w.cancel();  // no effect on one that fired
    }
  } cancel_all{watches};
  if (bound.count() <= 0) return;
  try {
    Watch::wait_any(watches, bound);
  } catch (const Error& e) {
    if (!e.retryable()) throw;
  }
}

void throw_attempts_timed_out(std::string_view wait, milliseconds timeout, const Error& cause) {
  throw Error(ErrorCode::kTimedOut,
              std::string(wait) + ": no attempt could finish within the " +
                  std::to_string(timeout.count()) + " ms timeout (an attempt gets at least " +
                  std::to_string(kWaitAttemptFloor.count()) + " ms): " + cause.what());
}

void ItemStore::wait_for_item(std::string_view name, Side side, milliseconds timeout,
                              const std::function<bool(milliseconds)>& attempt) {
  if (timeout.count() < 0) {
    throw Error(ErrorCode::kInvalidOptionValue, "queue: a wait's timeout must be >= 0");
  }
  const common::SteadyTime deadline = common::deadline_after(timeout);  // max() for "forever"
  VisibleStreak streak;
  for (;;) {
    if (attempt(common::time_left(deadline)) || common::time_left(deadline).count() == 0) return;
    // Arming is bounded as an attempt is: a lost server must not hold a short wait longer.
    TransactionOptions options;
    options.timeout = attempt_budget(common::time_left(deadline));
    Armed armed = run_wait_attempt(name, timeout, [&] {
      return db_->run(
          [&](Transaction& tr) {
            hint_arming_reads(tr, side);
            const bool visible = end_item(tr, side, /*snapshot=*/true).has_value();
            return Armed{{tr.watch(items_.size_key), tr.watch(work_.delayed_key())},
                         visible,
                         work_.next_due_us(tr)};
          },
          options);
    });
    const milliseconds bound = streak.next(armed.item_visible, common::time_left(deadline));
    sleep_on(armed.watches, sleep_bound(armed, bound));
  }
}

void ItemStore::hint_arming_reads(Transaction& tr, Side side) {
  if (!hint_reads_) return;
  const contention::OwnedRead reads[] = {
      contention::first_end_read(items_, side, 1, /*snapshot=*/true), work_.next_due_read(),
      contention::point_read(items_.size_key), contention::point_read(work_.delayed_key())};
  contention::prefetch(tr, reads);
}

std::optional<std::string> ItemStore::pop_wait(Side side, milliseconds timeout) {
  std::optional<std::string> out;
  wait_for_item("queue: pop_wait", side, timeout, [&](milliseconds left) {
    // Bounded by the time left, but at least kWaitAttemptFloor.
    out = run_wait_attempt("queue: pop_wait", timeout,
                           [&] { return pop(side, attempt_budget(left)); });
    return out.has_value();
  });
  return out;
}

std::optional<Lease> ItemStore::take_wait(Side side, milliseconds vt, milliseconds timeout) {
  WorkItems::lease_us(vt);  // invalid_option_value before waiting
  std::optional<Lease> out;
  wait_for_item("queue: take_wait", side, timeout, [&](milliseconds left) {
    // Bounded as a pop attempt is (a take whose commits keep failing must not outlive the wait).
    TransactionOptions options;
    options.timeout = attempt_budget(left);
    std::vector<Lease> one = run_wait_attempt("queue: take_wait", timeout, [&] {
      return run_marked([&](Transaction& tr) { return take_batch(tr, side, 1, vt); }, options);
    });
    if (!one.empty()) out = std::move(one.front());
    return out.has_value();
  });
  return out;
}

}  // namespace kvq::detail
