// kvq/priority_queue.h: a shared double-ended priority queue on a kvq::Database, FoundationDB's
// "Priority Queues" recipe plus its "High-Contention Pop" extension.
//
// Key layout (docs/queues.md):
//   subspace + (priority, count, random) = value   count from the push counter (one for all
//                                                  priorities, snapshot read, raised by each push);
//                                                  random = 20 random bytes
//   subspace + ("kvq", ...)                        control keys: size counter, markers, requests
//
// Example:
//   kvq::PriorityQueue pq(db, kvq::Subspace(kvq::Tuple().append("P")));
//   pq.push("low", 1);
//   pq.push("high", 9);
//   pq.pop_min();   // "low"
//   pq.pop_max();   // "high"
//
// Thread safety: as kvq::Queue (share freely; copies share state; the last copy deletes its
// idempotency markers).
#ifndef KVQ_PRIORITY_QUEUE_H_
#define KVQ_PRIORITY_QUEUE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvq/database.h"
#include "kvq/lease.h"
#include "kvq/queue.h"
#include "kvq/subspace.h"

namespace kvq {

// The options of a PriorityQueue: the same struct as QueueOptions (pop_timeout applies to pop_min
// and pop_max). The old name is kept as an alias (docs/CHANGELOG.md).
using PriorityQueueOptions = QueueOptions;

class PriorityQueue {
 public:
  // A priority queue under `subspace` of `db`. Throws invalid_option_value for bad options, and
  // invalid_argument for a subspace prefix over kMaxKeySize - Queue::kMaxOwnKeySize bytes. The
  // subspace is the priority queue's alone, as a Queue's is (Queue's constructor).
  PriorityQueue(std::shared_ptr<Database> db, Subspace subspace, PriorityQueueOptions options = {});

  // Inserts `value` (any bytes) with `priority` (any int64). Never conflicts with other pushes;
  // not inserted twice when retried after commit_unknown_result. Throws value_too_large and
  // non-retryable engine errors.
  void push(std::string_view value, std::int64_t priority);
  // As push inside the caller's transaction (idempotency is the caller's).
  void push(Transaction& tr, std::string_view value, std::int64_t priority);

  // Removes and returns an item of the lowest priority present, the oldest of that priority (the
  // first key); nullopt if empty. Items of equal priority whose pushes overlapped may come out in
  // either order. High-contention mode: requests (min and max alike) are served in the order made.
  // Throws timed_out after pop_timeout (item stays queued) and non-retryable engine errors; in
  // high-contention mode a pop that throws has withdrawn its request (as Queue::pop).
  std::optional<std::string> pop_min();
  std::optional<std::string> pop_min(std::chrono::milliseconds timeout);
  // Inside the caller's transaction, as Queue::pop(tr): in high-contention mode nullopt if waiting
  // pop requests are left that did not fit in it.
  std::optional<std::string> pop_min(Transaction& tr);
  // Removes and returns an item of the highest priority present, the NEWEST of that priority (the
  // last key: highest count); nullopt if empty. Otherwise as pop_min.
  std::optional<std::string> pop_max();
  std::optional<std::string> pop_max(std::chrono::milliseconds timeout);
  std::optional<std::string> pop_max(Transaction& tr);

  // ---- batches and blocking waits ----
  // Inserts (value, priority) pairs in ONE transaction with one idempotency marker (not inserted
  // twice when retried after commit_unknown_result); items of equal priority keep the batch's
  // order. Throws value_too_large / transaction_too_large before committing anything, as
  // Queue::push_batch.
  void push_batch(const std::vector<std::pair<std::string, std::int64_t>>& items);
  // As push_batch inside the caller's transaction. The items are written into the transaction
  // before its size is checked: after transaction_too_large, discard the transaction.
  void push_batch(Transaction& tr, const std::vector<std::pair<std::string, std::int64_t>>& items);
  // Removes and returns up to `n` items in ONE transaction, in the order n pop_min (pop_max) calls
  // would return them: lowest priority first, oldest first within a priority (pop_max: highest
  // first, newest first). Fewer than n if the queue holds fewer or the engine's transaction limits
  // cut the batch; timed_out after pop_timeout (as Queue::pop_batch).
  std::vector<std::string> pop_min_batch(std::size_t n);
  std::vector<std::string> pop_min_batch(Transaction& tr, std::size_t n);
  std::vector<std::string> pop_max_batch(std::size_t n);
  std::vector<std::string> pop_max_batch(Transaction& tr, std::size_t n);
  // As pop_min() / pop_max(), blocking while the queue is empty until an item comes (woken by a
  // watch, not polling; also at the due time of the earliest delayed item or lease) or `timeout`
  // passes (nullopt), as Queue::pop_wait.
  std::optional<std::string> pop_min_wait(std::chrono::milliseconds timeout);
  std::optional<std::string> pop_max_wait(std::chrono::milliseconds timeout);

  // The item pop_min / pop_max would return, without removing it; nullopt if empty.
  std::optional<std::string> peek_min();
  std::optional<std::string> peek_min(Transaction& tr);
  std::optional<std::string> peek_max();
  std::optional<std::string> peek_max(Transaction& tr);

  // Number of items, O(1). empty() == (size() == 0).
  std::int64_t size();
  std::int64_t size(Transaction& tr);
  bool empty();
  bool empty(Transaction& tr);

  // Removes every item (ready, leased and delayed) and resets the size counter (the push
  // counter goes on, so pushes stay in order with pushes made before); the dead letters stay
  // (dead_letters().clear() removes them).
  void clear();
  void clear(Transaction& tr);

  const Subspace& subspace() const;
  const PriorityQueueOptions& options() const { return options_; }

  // ---- work queues (kvq/lease.h; docs/queues.md, "Work queues"): as Queue's ----
  // A delayed item goes to its priority when due (due items are ordered by priority as any other).
  void push(std::string_view value, std::int64_t priority, const PushOptions& options);
  void push(Transaction& tr, std::string_view value, std::int64_t priority,
            const PushOptions& options);
  // Take the item pop_min / pop_max would return under a lease (Queue::take; Lease::priority is
  // its priority). An expired lease's item comes back at its own key: its place in its priority.
  std::optional<Lease> take_min(std::chrono::milliseconds visibility_timeout);
  std::optional<Lease> take_min(Transaction& tr, std::chrono::milliseconds visibility_timeout);
  std::optional<Lease> take_max(std::chrono::milliseconds visibility_timeout);
  std::optional<Lease> take_max(Transaction& tr, std::chrono::milliseconds visibility_timeout);
  // Take up to `n` items under leases in ONE transaction, in the order pop_min_batch /
  // pop_max_batch would return them (lowest priority first, oldest first within one; max: highest
  // first, newest first). Otherwise as Queue::take_batch.
  std::vector<Lease> take_min_batch(std::size_t n, std::chrono::milliseconds visibility_timeout);
  std::vector<Lease> take_min_batch(Transaction& tr, std::size_t n,
                                    std::chrono::milliseconds visibility_timeout);
  std::vector<Lease> take_max_batch(std::size_t n, std::chrono::milliseconds visibility_timeout);
  std::vector<Lease> take_max_batch(Transaction& tr, std::size_t n,
                                    std::chrono::milliseconds visibility_timeout);
  // As take_min() / take_max(), blocking while no item is ready until one is or `timeout` passes
  // (nullopt), woken as Queue::take_wait.
  std::optional<Lease> take_min_wait(std::chrono::milliseconds visibility_timeout,
                                     std::chrono::milliseconds timeout);
  std::optional<Lease> take_max_wait(std::chrono::milliseconds visibility_timeout,
                                     std::chrono::milliseconds timeout);
  // As Queue::ack / nack / extend (a nack with a delay puts the item back at its priority).
  void ack(const Lease& lease);
  void ack(Transaction& tr, const Lease& lease);
  void nack(const Lease& lease, std::chrono::milliseconds delay = {}, std::string_view reason = {});
  void nack(Transaction& tr, const Lease& lease, std::chrono::milliseconds delay = {},
            std::string_view reason = {});
  WallClock::time_point extend(const Lease& lease, std::chrono::milliseconds visibility_timeout);
  WallClock::time_point extend(Transaction& tr, const Lease& lease,
                               std::chrono::milliseconds visibility_timeout);
  // The dead letters: a Queue (FIFO in the order they died), each remembering its priority, where
  // redrive() puts it back.
  Queue dead_letters() const;
  std::vector<DeadLetter> peek_dead_letters(int limit);
  std::int64_t redrive(std::int64_t n);
  // As Queue::stats; oldest_ready_age is the age of the item take_min would return.
  QueueStats stats();
  QueueStats stats(Transaction& tr);

 private:
  PriorityQueueOptions options_;
  std::shared_ptr<detail::ItemStore> store_;
};

}  // namespace kvq

#endif  // KVQ_PRIORITY_QUEUE_H_
