// kvq/queue.h: a shared FIFO queue on a kvq::Database, FoundationDB's "Queues" recipe plus its
// "High-Contention Dequeue" extension.
//
// Many clients (threads or processes) may push and pop one queue at once; every operation is a
// transaction, so an item is popped by exactly one client. Key layout (docs/queues.md):
//   subspace + (index, random)          = value       one item; index from a snapshot read of the
//                                                     last item + 1, random = 20 random bytes
//   subspace + ("kvq", ...)             control keys: size counter, idempotency markers, pop
//                                                     requests (high-contention mode)
//
// Example:
//   auto db = kvq::open("memory:");
//   kvq::Queue q(db, kvq::Subspace(kvq::Tuple().append("Q")));
//   q.push("job-1");
//   std::optional<std::string> v = q.pop();   // "job-1"
//   db->run([&](kvq::Transaction& tr) { q.push(tr, "a"); q.push(tr, "b"); });   // compose
//
// Thread safety: a Queue object may be shared by any number of threads; it is cheap to copy (copies
// share state). When the last copy is destroyed, it deletes the idempotency markers it left in the
// store (best effort, bounded in time, never throwing).
#ifndef KVQ_QUEUE_H_
#define KVQ_QUEUE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/database.h"
#include "kvq/lease.h"
#include "kvq/subspace.h"

namespace kvq {

namespace detail {
class ItemStore;
class FairState;
}  // namespace detail

// Options of the high-contention pop machinery, shared by Queue and PriorityQueue.
struct HighContentionOptions {
  // Pop requests one fulfilling transaction serves at most, 1 to 100,000. A batch is also cut to
  // what fits in one transaction of the engine (Database::limits(): bytes, and etcd's
  // --max-txn-ops), so the number of waiting pops never makes a pop fail. Default: 128.
  int batch_size = 128;
  // How long the fulfiller lease (the one popper that fulfils requests) lasts without renewal,
  // beyond the time the holder's last batch took (so slow batches do not invite takeovers); a
  // waiter whose fulfiller vanished takes over after that. At most kMaxWorkDuration. Default:
  // 100 ms.
  std::chrono::milliseconds lease{100};
  // A pop request older than this is taken for the request of a popper that died: the next
  // fulfiller withdraws it, and an item delivered to it but not taken within this time goes back
  // to its place in the queue. A live popper whose request expired registers again (so a pop that
  // waits longer than this loses its place in line, never an item). At most kMaxWorkDuration.
  // Default: 30 s.
  std::chrono::milliseconds request_ttl{30'000};
};

// Options of Queue, and of PriorityQueue (PriorityQueueOptions is the same struct).
struct QueueOptions {
  // Pops that conflict register a request and are served in batches by one fulfiller (see
  // docs/queues.md). Default: false (the plain recipe: pops retry on conflict). Every client of
  // one queue (threads, processes) should use the same mode: only high-contention pops put back
  // an item delivered to a popper that died, and only they wait their turn behind requests.
  bool high_contention = false;
  // Tuning of high-contention mode.
  HighContentionOptions contention;
  // pop() (pop_min(), pop_max(), and the batches) gives up after this long (0 = never; so does one
  // longer than a transaction's longest timeout, 2,147,483,647 ms): throws timed_out, leaving the
  // item in the queue unless it was already delivered, in which case pop returns it. Default: 0.
  std::chrono::milliseconds pop_timeout{0};
  // Pushes and pops write a small idempotency marker so that a retry after commit_unknown_result
  // neither inserts twice nor loses a popped item. Later operations of the same object delete the
  // markers of finished ones, and its destructor deletes the rest, so an object leaves none behind;
  // markers older than this (of processes that died) are swept by later operations. A retry loop
  // lasting longer than this is no longer protected. Default: 10 min.
  std::chrono::milliseconds marker_ttl{600'000};
  // Work queues (kvq/lease.h): an item whose next delivery would be its (max_attempts + 1)th goes,
  // in the same transaction, to dead_letters() instead: when a lease of its max_attempts-th
  // delivery runs out or is nacked. 0 = unlimited; < 0 is invalid_option_value. Default: 0.
  int max_attempts = 0;
  // Flat combining within this process: threads that push to (or pop from) the same object at
  // once are served by one of them in one transaction (a push or pop batch), each getting its own
  // item or acknowledgement, in the order they called. Applies to push(value) and to the pops
  // that run their own transactions (pop(), pop(timeout), pop_min(), pop_max(), the *_wait forms;
  // a group's work is bounded by its pops' deadlines); the Transaction& overloads run alone.
  // Guarantees are those of the single operations (exactly once, order, idempotent under
  // commit_unknown_result). docs/queues.md, "Combining". Default: false.
  bool combine = false;
  // With combine: favour the tail latency over throughput when the process has more threads on
  // this object than cores. A thread about to lead a group of its own operation alone, right after
  // a group of several was served, first yields its core to the threads that group woke, and
  // waiting threads do not poll. Measured on 2 cores, 32 threads: push and pop p99 2-5 ms ->
  // 0.4-0.9 ms; operations per second 10-35 % fewer while other processes loaded the machine
  // (runs F, G), 30-60 % more on a quiet one (run H; docs/benchmarks.md). Default: false.
  bool combine_favors_latency = false;
};

class Queue {
 public:
  // The most bytes a queue's keys add to its subspace's prefix (the longest: the timer of a lease
  // on a dead letter, which holds the letter's 1,000-byte reason escaped twice if the tuple
  // encoding escapes its bytes: 3,095 measured, with room for the suffix of a lease that ran
  // out). A prefix may be at most kMaxKeySize - kMaxOwnKeySize bytes (PriorityQueue's too).
  static constexpr std::size_t kMaxOwnKeySize = 3200;

  // A queue stored under `subspace` of `db`. Throws invalid_option_value for a
  // contention.batch_size outside 1..100,000, negative durations, a marker_ttl,
  // contention.lease or contention.request_ttl of 0, or a contention.lease or
  // contention.request_ttl over kMaxWorkDuration;
  // invalid_argument for a subspace prefix over kMaxKeySize - kMaxOwnKeySize bytes. Does no I/O.
  // The subspace is the queue's alone, with everything under it: no other structure or key may
  // be stored under it (a Queue at S takes every key (integer, ...) under S for an item, so one at
  // S[5] would be popped from S), nor may a Queue and a PriorityQueue share one. Give each its own
  // subspace, as siblings: S["jobs"], S["done"].
  Queue(std::shared_ptr<Database> db, Subspace subspace, QueueOptions options = {});

  // Appends `value` (any bytes, at most kMaxValueSize) at the back. Never conflicts with other
  // pushes. Retries internally; a retry after commit_unknown_result does not insert twice (the
  // item's random part is chosen once and a push marker is checked). Throws value_too_large and
  // non-retryable engine errors.
  void push(std::string_view value);
  // As push(value) inside the caller's transaction (no marker: the caller's retry loop owns
  // idempotency; each call inserts one new item).
  void push(Transaction& tr, std::string_view value);

  // Removes and returns the front item; nullopt if the queue is empty. Safe to retry after
  // commit_unknown_result (a marker tells whether the earlier attempt popped). Ordering: items
  // whose pushes did not overlap in time are popped in push order (pushes that overlap may come out
  // in either order). In high-contention mode, requests are served in the order they were made and
  // a new pop never overtakes a waiting one. Throws timed_out after options.pop_timeout (the item
  // then stays in the queue), and non-retryable engine errors; a high-contention pop that throws
  // has withdrawn its request and put back an item already delivered to it (best effort: if the
  // engine is unreachable, a later pop does so after contention.request_ttl).
  std::optional<std::string> pop();
  // As pop() with its own timeout (0 = none, as is one over 2,147,483,647 ms) instead of
  // options.pop_timeout. Throws invalid_option_value for a negative timeout.
  std::optional<std::string> pop(std::chrono::milliseconds timeout);
  // As pop() inside the caller's transaction. In high-contention mode it first serves waiting
  // requests in this transaction (as many as fit in the engine's transaction limits), so it does
  // not overtake them either: if some are left waiting (more than fit), it pops nothing (nullopt).
  std::optional<std::string> pop(Transaction& tr);

  // ---- batches and blocking waits ----
  // Appends `values` at the back in order (they pop in this order), in ONE transaction, with one
  // idempotency marker: not inserted twice when retried after commit_unknown_result. Throws
  // value_too_large if any value is over kMaxValueSize, and transaction_too_large if the batch does
  // not fit in one transaction of the engine (Database::limits(): 10 MB; on etcd also
  // --max-txn-ops, 128 operations by default, so about 100 items), in both cases before anything
  // is committed: split the batch then. An empty batch does nothing.
  void push_batch(const std::vector<std::string>& values);
  void push_batch(std::span<const std::string_view> values);
  // As push_batch inside the caller's transaction (no marker; idempotency is the caller's). The
  // items are written into the transaction before its size is checked: after
  // transaction_too_large, discard the transaction (reset(), or let on_error/run retry it), do not
  // push the halves into it.
  void push_batch(Transaction& tr, const std::vector<std::string>& values);
  void push_batch(Transaction& tr, std::span<const std::string_view> values);
  // Removes and returns up to `n` items from the front, in queue order, in ONE transaction
  // (idempotent under commit_unknown_result as pop()). Fewer than n if the queue holds fewer, or
  // if more would not fit in one transaction of the engine (on etcd about 50). Empty if the
  // queue is empty. High-contention mode: serves waiting pop requests first (no overtaking), over
  // several transactions if they do not fit in one.
  // Throws timed_out, having popped nothing, if no attempt could commit within
  // options.pop_timeout (as pop(); none by default).
  std::vector<std::string> pop_batch(std::size_t n);
  // As pop_batch inside the caller's transaction; in high-contention mode empty if waiting pop
  // requests are left that did not fit in it (as pop(tr)).
  std::vector<std::string> pop_batch(Transaction& tr, std::size_t n);
  // As pop(), but while the queue is empty it blocks until an item comes (woken by a watch on the
  // size counter, which every push writes: no polling; and at the due time of the earliest delayed
  // item or lease, as take_wait) or `timeout` passes: nullopt then, meaning the last attempt saw
  // no item. A pop attempt under way at the timeout may finish up to 1 s later (pop_wait(0) is one
  // try on any engine); if it cannot (its commits keep failing, or a high-contention pop is not
  // answered), pop_wait throws timed_out naming the last error, and no item was removed. Throws
  // invalid_option_value for timeout < 0, non-retryable engine errors (connection_failed if the
  // engine could not reach its server within its failover budget). With options.combine too, the
  // attempts are bounded by the timeout.
  std::optional<std::string> pop_wait(std::chrono::milliseconds timeout);

  // The front item without removing it; nullopt if empty. Adds a read conflict on it.
  std::optional<std::string> peek();
  std::optional<std::string> peek(Transaction& tr);

  // Number of items in the queue, in O(1) (a counter kept in the same transactions).
  std::int64_t size();
  std::int64_t size(Transaction& tr);
  // size() == 0.
  bool empty();
  bool empty(Transaction& tr);

  // Removes every item (ready, leased and delayed) and resets the counter; the dead letters stay
  // (dead_letters().clear() removes them). Waiting high-contention pops get nullopt; an item
  // already delivered to a popper that died before taking it is put back after request_ttl.
  void clear();
  void clear(Transaction& tr);

  const Subspace& subspace() const;
  const QueueOptions& options() const { return options_; }

  // ---- work queues (kvq/lease.h; docs/queues.md, "Work queues") ----
  // Clock: lease deadlines and due times are this client's wall clock (kvq::WallClock). Expired
  // leases and due delayed items are moved back by the next pops, takes and peeks (up to 8 per
  // operation, earliest due first), so they need no reaper process. Until one is moved, it counts
  // as leased or delayed: size(), empty() and stats().ready leave it out, and a push made after
  // it came due but before it was moved goes ahead of a delayed item (an expired lease's item
  // returns to its own place). With more than 8 due at once, an operation may serve an item that
  // a timer not yet moved would have preceded. size() counts ready items only; stats() the rest.

  // Appends `value` invisible to pop, take and peek until options.delay has passed and
  // options.not_before is reached (due now: as push(value)); a delayed item goes to the back when
  // it is moved after coming due (see Clock above). Idempotent under commit_unknown_result. Throws
  // invalid_option_value for a negative delay, value_too_large, and engine errors.
  void push(std::string_view value, const PushOptions& options);
  void push(Transaction& tr, std::string_view value, const PushOptions& options);

  // Takes the front item under a lease of `visibility_timeout` (> 0): it stays stored, invisible to
  // pop, take and peek, until acked (removed), nacked (back) or the lease runs out (back at its
  // place with attempt + 1). nullopt if no item is ready. Same order as pop(); takes do not use
  // high-contention staging (conflicting takes retry). Idempotent under commit_unknown_result.
  // Throws invalid_option_value for visibility_timeout <= 0 or over kMaxWorkDuration, and engine
  // errors.
  std::optional<Lease> take(std::chrono::milliseconds visibility_timeout);
  std::optional<Lease> take(Transaction& tr, std::chrono::milliseconds visibility_timeout);
  // Takes up to `n` items from the front under leases of `visibility_timeout` (> 0), in ONE
  // transaction, in the order n take() calls (and pop_batch) would return them. Fewer than n if
  // fewer are ready, or if more would not fit in one transaction of the engine (Database::limits();
  // a take costs about four operations per item on etcd: 34 there by default); empty if none is
  // ready or n == 0. Due timers (expired leases, delayed items) are moved back first, as by take.
  // Each lease is acked, nacked or extended on its own. Idempotent under commit_unknown_result (one
  // marker for the batch: a retry neither leases twice nor loses the leases). Throws
  // invalid_option_value for visibility_timeout <= 0 or over kMaxWorkDuration (nothing changed,
  // even for n == 0), and engine errors.
  std::vector<Lease> take_batch(std::size_t n, std::chrono::milliseconds visibility_timeout);
  // As take_batch inside the caller's transaction (no marker; idempotency is the caller's).
  std::vector<Lease> take_batch(Transaction& tr, std::size_t n,
                                std::chrono::milliseconds visibility_timeout);
  // As take(), but while no item is ready it blocks until one is or `timeout` (>= 0) passes
  // (nullopt then). Woken by a watch on the size counter (every push writes it) and, with no push,
  // at the due time of the earliest delayed item or lease (read when the wait starts, and again
  // when a delayed push or a nack with a delay writes the delayed-item counter, also watched; an
  // extend that shortens a lease is noticed at its old deadline). No polling. A take attempt under
  // way at the timeout may finish up to 1 s later; if its commits keep failing it throws
  // timed_out (naming the last error; no lease was taken) instead of returning nullopt.
  // Throws invalid_option_value for visibility_timeout <= 0 or over kMaxWorkDuration or
  // timeout < 0, and engine errors (connection_failed if the engine could not reach its server
  // within its failover budget).
  std::optional<Lease> take_wait(std::chrono::milliseconds visibility_timeout,
                                 std::chrono::milliseconds timeout);
  // Removes the leased item. Allowed while the lease's fence exists: until the deadline, and after
  // it until a pop, take or peek moves the item back (SQS-like). Throws lease_lost (nothing
  // changed) once the item was moved back (maybe taken again), acked or nacked; invalid_lease_token
  // for a malformed token or one of another queue. ack(lease) is idempotent under
  // commit_unknown_result (a marker); ack(tr, lease) is the caller's: a retry of a transaction
  // that did commit throws lease_lost, so check your own write in the same transaction to tell.
  void ack(const Lease& lease);
  void ack(Transaction& tr, const Lease& lease);
  // Gives the item back: at its place in line (delay 0) or, after `delay`, at the back. Counts as a
  // delivery: past max_attempts the item goes to dead_letters() with `reason` (UTF-8 text, cut to
  // 1,000 bytes between characters). Throws as ack, invalid_option_value for a negative delay,
  // and invalid_argument for a reason that is not UTF-8 (before changing anything).
  void nack(const Lease& lease, std::chrono::milliseconds delay = {}, std::string_view reason = {});
  void nack(Transaction& tr, const Lease& lease, std::chrono::milliseconds delay = {},
            std::string_view reason = {});
  // Renews the lease: it now runs out `visibility_timeout` (> 0) from now; returns the new
  // deadline (the token stays valid). Throws as ack, and invalid_option_value for <= 0.
  WallClock::time_point extend(const Lease& lease, std::chrono::milliseconds visibility_timeout);
  WallClock::time_point extend(Transaction& tr, const Lease& lease,
                               std::chrono::milliseconds visibility_timeout);

  // The dead-letter queue: a Queue under subspace + ("kvq", "dead"), of the values that used up
  // max_attempts (pop, take, size, clear work on it as on any Queue).
  Queue dead_letters() const;
  // Up to `limit` (>= 0, else invalid_option_value) dead letters from its front with their
  // history, without removing them.
  std::vector<DeadLetter> peek_dead_letters(int limit);
  // Moves up to `n` (>= 0) dead letters back to the back of this queue, attempts reset, in
  // transactions of up to 32; returns how many moved. Idempotent under commit_unknown_result.
  std::int64_t redrive(std::int64_t n);
  // As redrive(n) inside the caller's transaction: up to `n` move in it, fewer if more would not
  // fit in what is left of the engine's limits, bytes and (etcd) operations (at least one, if
  // there is one; no marker: idempotency is the caller's).
  std::int64_t redrive(Transaction& tr, std::int64_t n);
  // Ready, delayed, leased and dead-letter counts (O(1), counters kept in the same transactions)
  // and the age of the front item. Snapshot reads: conflicts with nothing.
  QueueStats stats();
  QueueStats stats(Transaction& tr);

 private:
  friend class detail::FairState;  // a fair queue's tenants: Queues over their own ItemStore
  friend class PriorityQueue;      // its dead letters: a Queue over its own ItemStore
  Queue(QueueOptions options, std::shared_ptr<detail::ItemStore> store);

  QueueOptions options_;
  std::shared_ptr<detail::ItemStore> store_;
};

}  // namespace kvq

#endif  // KVQ_QUEUE_H_
