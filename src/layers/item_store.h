// Internal: the machinery Queue and PriorityQueue share. Both keep items at keys of the form
// subspace + (int, ...) and control keys under subspace + ("kvq", ...); a Queue is the one-sided
// case (front only) of a double-ended priority queue whose first key element is the push index.
// docs/queues.md has the key layout; contention/markers.h the idempotency markers; contention/ the
// high-contention pops. contention_stats() (contention/stats.h) is exported from here.
#ifndef KVQ_SRC_LAYERS_ITEM_STORE_H_
#define KVQ_SRC_LAYERS_ITEM_STORE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "kvq/database.h"
#include "kvq/lease.h"
#include "kvq/queue.h"
#include "kvq/subspace.h"
#include "layers/contention/control.h"
#include "layers/contention/marked_run.h"
#include "layers/contention/markers.h"
#include "layers/contention/run_once.h"
#include "layers/contention/staged_pop.h"
#include "layers/contention/stats.h"
#include "layers/fitting.h"
#include "layers/work_items.h"

namespace kvq::detail {

using contention::Side;

class CombinedOps;

// One item of a push batch: the value and, for priority queues, its priority.
struct PushItem {
  std::string_view value;
  std::int64_t priority = 0;
};

class ItemStore {
 public:
  static constexpr std::size_t kRandomSize = 20;  // of item keys, as the recipes' os.urandom(20)

  // `prioritized` selects the PriorityQueue layout (priority, count, random); otherwise the Queue
  // layout (index, random). Throws invalid_argument for a null db, invalid_option_value for bad
  // options. Does no I/O. `total_key`: a counter that every change of the item count also goes
  // to (contention::ItemRange::total_key); "" for none.
  ItemStore(std::shared_ptr<Database> db, Subspace subspace, QueueOptions options, bool prioritized,
            const std::string& total_key = {});
  ~ItemStore();
  ItemStore(const ItemStore&) = delete;
  ItemStore& operator=(const ItemStore&) = delete;

  // Push with its own retry loop and idempotency marker. `priority` is ignored for queues.
  void push(std::string_view value, std::int64_t priority);
  // As push, never combined with other threads' pushes (CombinedOps pushes a request alone so).
  void push_uncombined(std::string_view value, std::int64_t priority);
  // Push inside `tr` (a new random part; idempotency is the caller's).
  void push(Transaction& tr, std::string_view value, std::int64_t priority);

  // Pop with its own retry loop (combined, or high-contention staging, if enabled); timeout 0 =
  // none, else timed_out when it passes before the pop could finish (then it removed nothing).
  std::optional<std::string> pop(Side side, std::chrono::milliseconds timeout);
  // Pop inside `tr`; in high-contention mode serves waiting requests first.
  std::optional<std::string> pop(Transaction& tr, Side side);
  std::optional<std::string> peek(Transaction& tr, Side side);
  std::int64_t size(Transaction& tr);
  void clear(Transaction& tr);

  // ---- batches (batch_ops.cc) ----
  // Pushes `items` in order, in one transaction with its own retry loop and one marker (not
  // inserted twice after commit_unknown_result). Throws value_too_large for an item over
  // kMaxValueSize and transaction_too_large if the batch does not fit in one transaction of the
  // engine (Database::limits()), both before anything is written.
  void push_batch(std::span<const PushItem> items);
  // As push_batch inside `tr` (idempotency is the caller's).
  void push_batch(Transaction& tr, std::span<const PushItem> items);
  // Pops up to `n` items from `side` in one transaction (own retry loop and marker, bounded by
  // `timeout` as TransactionOptions::timeout is; 0: none), in the order single pops would return
  // them; fewer if the queue holds fewer (kMeansNoMore; with kSaysNothing, fewer says nothing of
  // the rest, fitting.h), or if more would not fit in one transaction of the engine.
  // High-contention mode: serves waiting requests first.
  std::vector<std::string> pop_batch(Side side, std::size_t n, ShortBatch short_batch,
                                     std::chrono::milliseconds timeout = {});
  // As pop_batch(side, n, kMeansNoMore) inside `tr`.
  std::vector<std::string> pop_batch(Transaction& tr, Side side, std::size_t n);
  // pop_batch(side, n, kMeansNoMore) bounded by a pop's `timeout`, as pop(side, timeout) is
  // (invalid_option_value if negative, none if 0 or over a transaction's longest): throws
  // timed_out, having popped nothing, if no attempt could commit by then.
  std::vector<std::string> pop_batch_within(Side side, std::size_t n,
                                            std::chrono::milliseconds timeout);
  // High-contention mode's fast path for a combined group's batch: one attempt at
  // pop_batch(side, n, kSaysNothing); nullopt if pops are waiting (a new pop must queue up behind
  // them), the attempt conflicted, or the queue looks empty while abandoned deliveries wait to be
  // put back. Then the pops should be staged.
  std::optional<std::vector<std::string>> pop_batch_fast(Side side, std::size_t n);
  // pop(side, timeout) without combining (throws transaction_timed_out where pop throws
  // timed_out).
  std::optional<std::string> pop_alone(Side side, std::chrono::milliseconds timeout);
  // High-contention mode: `n` pops staged as one request behind the waiting ones (a combined group
  // whose fast path failed): 1 to n items in pop order, fewer if the fulfiller had room for
  // fewer; none if the queue was empty. Own retry loop; throws timed_out if not answered by
  // `deadline` (StagedPops).
  std::vector<std::string> pop_staged_batch(Side side, std::size_t n, common::SteadyTime deadline);
  bool high_contention() const { return staged_ != nullptr; }

  // ---- takes (batch_ops.cc): leases of the items pops would return ----
  // Takes up to `n` items from `side` under leases of `vt` (> 0, else invalid_option_value, checked
  // first), in one transaction, in pop_batch's order and cut to the engine's limits as pop_batch;
  // due timers are released first. The own-loop form is safe under commit_unknown_result (one
  // marker). Takes do not use high-contention staging (conflicting takes retry).
  std::vector<Lease> take_batch(Side side, std::size_t n, std::chrono::milliseconds vt);
  std::vector<Lease> take_batch(Transaction& tr, Side side, std::size_t n,
                                std::chrono::milliseconds vt);
  // take_batch of one: nullopt if no item is ready.
  std::optional<Lease> take(Side side, std::chrono::milliseconds vt);
  std::optional<Lease> take(Transaction& tr, Side side, std::chrono::milliseconds vt);
  // A take that may be refused: moves due timers, reads the item at `side` (its reads and `also`
  // handed to Transaction::prefetch together), and takes it under a lease of `vt` unless
  // refuse(tr) says so. One round trip on etcd where a peek and then a take would make two.
  struct GuardedTake {
    enum Outcome { kEmpty, kRefused, kTaken };
    Outcome outcome = kEmpty;
    std::optional<Lease> lease;  // kTaken
  };
  // Timers count as due by `now` (unix µs): take_unless's first reads are first_reads(side, now)
  // and `also`, so a caller that hinted them already (a guess of the next take) saves a round trip.
  GuardedTake take_unless(Transaction& tr, Side side, std::chrono::milliseconds vt,
                          std::span<const contention::OwnedRead> also,
                          const std::function<bool(Transaction&)>& refuse, std::int64_t now);
  // The first reads of a pop or take at `side` at `now` (µs): the due timers' and the end's (for
  // Transaction::prefetch).
  std::vector<contention::OwnedRead> first_reads(Side side, std::int64_t now) const;

  // ---- blocking waits (waiting.cc) ----
  // A pop that, while the queue is empty, blocks on a watch of the size counter (written by every
  // push) until an item comes or `timeout` passes (nullopt then). Throws timed_out if the time ran
  // out while an attempt could not finish (layers/waiting.h).
  std::optional<std::string> pop_wait(Side side, std::chrono::milliseconds timeout);
  // A take (lease of `vt`) that blocks as pop_wait does while no item is ready (and throws
  // timed_out as it does).
  std::optional<Lease> take_wait(Side side, std::chrono::milliseconds vt,
                                 std::chrono::milliseconds timeout);

  const Subspace& subspace() const { return subspace_; }
  Database& db() { return *db_; }
  const QueueOptions& options() const { return options_; }
  // Finished idempotency markers this object still has in the store (for tests).
  std::size_t pending_markers() const { return markers_.pending(); }

  // ---- work queues (kvq/lease.h): leases, delayed items, dead letters ----
  WorkItems& work() { return work_; }

 private:
  struct Fast {
    bool staged = false;  // the pop must queue up behind others
    std::optional<std::string> value;
  };
  // body(tr) with an idempotency marker as the identity (marked_run.h).
  template <typename Body>
  auto run_marked(Body&& body, const TransactionOptions& options = {}) {
    return detail::run_marked(*db_, markers_, std::forward<Body>(body), options);
  }
  // The key of a push of `priority` with `random` (fresh_item_key: behind the items pushed
  // before).
  std::string item_key(Transaction& tr, std::int64_t priority, const std::string& random);
  void write_batch(Transaction& tr, std::span<const PushItem> items,
                   const std::vector<std::string>& randoms);
  void check_fits(Transaction& tr, std::size_t count);
  // Calls consume(kv) on up to `n` items from `side` (consume clears or moves each) and takes
  // them off the size counter; returns how many (fitting.h). Due timers are the caller's
  // (release_due_before_end first).
  std::size_t consume_fitting(Transaction& tr, Side side, std::size_t n, ShortBatch short_batch,
                              ItemWrites writes, const std::function<void(KeyValue&)>& consume);
  std::vector<std::string> pop_fitting(Transaction& tr, Side side, std::size_t n,
                                       ShortBatch short_batch);
  std::vector<std::string> pop_batch(Transaction& tr, Side side, std::size_t n,
                                     ShortBatch short_batch);
  // The loop of pop_wait and take_wait (`name` names it in errors): runs attempt(time left) until
  // it returns true (done) or `timeout` passes, sleeping on a watch of the size counter between
  // attempts, bounded by the earliest timer's due time (waiting.cc).
  void wait_for_item(std::string_view name, Side side, std::chrono::milliseconds timeout,
                     const std::function<bool(std::chrono::milliseconds)>& attempt);
  // The reads of wait_for_item's arming transaction (the item at `side`, the first timer, the
  // two watched counters), handed to Transaction::prefetch together if reads take round trips.
  void hint_arming_reads(Transaction& tr, Side side);
  // Moves due timers (release_due_before_end), then in high-contention mode answers the waiting
  // requests (StagedPops::serve_all), so that a pop in `tr` after this overtakes none of them.
  // False if requests are left waiting (more than fit in `tr`): then `tr` must pop nothing.
  bool release_due_and_serve_waiting(Transaction& tr, Side side);
  // Moves due timers (WorkItems::release_due) before a read of the item at `side`: the timers'
  // read and that read's first part go to the engine together if reads take round trips
  // (Transaction::prefetch: one round trip on etcd instead of two).
  // `also`: further reads for the same prefetch (hint_due_and_end).
  void release_due_before_end(Transaction& tr, Side side,
                              std::span<const contention::OwnedRead> also = {});
  // As release_due_before_end(tr, side, also), with timers due by `now` (unix µs).
  void release_due_before_end(Transaction& tr, Side side,
                              std::span<const contention::OwnedRead> also, std::int64_t now);
  // The first reads of a pop at `side` at `now` (µs): the due timers' and the end's, and `also`,
  // handed to Transaction::prefetch together if reads take round trips (else nothing).
  void hint_due_and_end(Transaction& tr, Side side, std::int64_t now,
                        std::span<const contention::OwnedRead> also = {});
  std::optional<KeyValue> end_item(Transaction& tr, Side side, bool snapshot);
  // Moves due timers, then pops the item at `side` (pop_end).
  std::optional<std::string> pop_plain(Transaction& tr, Side side);
  // Pops the item at `side` (a read with a conflict); due timers are the caller's.
  std::optional<std::string> pop_end(Transaction& tr, Side side);
  std::optional<std::string> pop_staged(Side side, std::chrono::milliseconds timeout);
  Fast pop_fast(Side side);

  std::shared_ptr<Database> db_;
  bool hint_reads_;  // db_->reads_take_round_trips(): prefetch what pops read next
  Subspace subspace_;
  Subspace control_;
  QueueOptions options_;
  bool prioritized_;
  contention::ItemRange items_;
  Markers markers_;
  std::unique_ptr<contention::StagedPops> staged_;  // high-contention mode only
  WorkItems work_;                         // releases due timers at the start of every pop and peek
  std::unique_ptr<CombinedOps> combined_;  // options.combine only
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_ITEM_STORE_H_
