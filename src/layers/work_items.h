// Internal: the work-queue side of Queue and PriorityQueue (kvq/lease.h; docs/queues.md, "Work
// queues"): leases, acks, nacks, extends, delayed pushes, dead letters and stats, over the item
// layout of item_keys.h and the timers of work_keys.h. ItemStore owns one and calls
// release_due() at the start of every pop and peek, so expired leases and due delayed items come
// back without a reaper process.
//
// Each live lease also keeps its item's place under ItemRange::held_prefix (written by the take,
// cleared with the fence), so that a Queue's pushes go behind it (item_keys.h fresh_item_keys; a
// PriorityQueue's do by their push counter).
//
// Conflicts: release_due() finds due timers with a snapshot read and adds a read conflict only on
// each timer it moves, so pops never conflict with takes through the timer range; an ack, nack or
// extend reads its lease's fence key (work_keys.h), which the move clears: of a move and an ack of
// the same lease, exactly one commits. Thread-safe (as ItemStore).
#ifndef KVQ_SRC_LAYERS_WORK_ITEMS_H_
#define KVQ_SRC_LAYERS_WORK_ITEMS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/database.h"
#include "kvq/lease.h"
#include "kvq/queue.h"
#include "kvq/subspace.h"
#include "layers/contention/control.h"
#include "layers/contention/markers.h"
#include "layers/contention/owned_read.h"
#include "layers/dead_letters.h"
#include "layers/work_keys.h"

namespace kvq::detail {

class WorkItems {
 public:
  using Side = contention::Side;
  // The work keys of the queue stored under `subspace` (prioritized: a PriorityQueue), whose items
  // are `items` (ItemStore's: a copy shares its end hints). Throws invalid_option_value for
  // options.max_attempts < 0. Does no I/O.
  WorkItems(std::shared_ptr<Database> db, const Subspace& subspace, const QueueOptions& options,
            bool prioritized, contention::ItemRange items);

  // Moves up to kReleasePerOp due timers into the items (expired leases to their own key with
  // their attempts; due delayed items to a fresh key), or to the dead letters when an expired
  // lease used up max_attempts.
  // Timers are due by `now_us` (unix µs).
  void release_due(Transaction& tr, std::int64_t now_us);
  // The read release_due(tr, now_us) starts with (for Transaction::prefetch).
  contention::OwnedRead due_read(std::int64_t now_us) const;

  // The visibility timeout `vt` in microseconds; throws invalid_option_value unless vt > 0.
  static std::int64_t lease_us(std::chrono::milliseconds vt);
  // Puts the item `kv` (read from the items, non-snapshot) under a lease of `vt_us`: clears it and
  // writes its timer and fence. The caller adjusts the counters (count_taken).
  Lease lease(Transaction& tr, KeyValue& kv, std::int64_t vt_us);
  // Counts `n` items just leased (the caller took them off the size counter).
  void count_taken(Transaction& tr, std::size_t n);
  // The due time (unix us) of the earliest timer (lease or delayed item), from a snapshot read;
  // nullopt if there is none. A blocking wait bounds its sleep by it.
  std::optional<std::int64_t> next_due_us(Transaction& tr);
  // The read next_due_us(tr) makes (for Transaction::prefetch).
  contention::OwnedRead next_due_read() const;
  // Throw lease_lost if the lease's fence is gone, invalid_lease_token for a bad token,
  // invalid_option_value for a bad duration; then nothing is changed. The forms in a transaction
  // return (ack, nack) or set in *was_due_us (extend, if not null) the due time (unix us) the
  // lease's timer had: its deadline as the last extend left it, which `lease` may not know.
  std::int64_t ack(Transaction& tr, const Lease& lease);
  void ack(const Lease& lease);
  std::int64_t nack(Transaction& tr, const Lease& lease, std::chrono::milliseconds delay,
                    std::string_view reason);
  void nack(const Lease& lease, std::chrono::milliseconds delay, std::string_view reason);
  WallClock::time_point extend(Transaction& tr, const Lease& lease, std::chrono::milliseconds vt,
                               std::int64_t* was_due_us = nullptr);
  WallClock::time_point extend(const Lease& lease, std::chrono::milliseconds vt);

  // When a push with `options` is due (unix us), or nullopt if it is due now (a plain push).
  // Throws invalid_option_value for a negative delay.
  static std::optional<std::int64_t> due_us(const PushOptions& options);
  // Pushes `value` as a delayed item due at `due` (from due_us()).
  void push_delayed(Transaction& tr, std::string_view value, std::int64_t priority,
                    std::int64_t due);
  void push_delayed(std::string_view value, std::int64_t priority, std::int64_t due);

  // Moves up to `n` dead letters back (Queue: to the back; PriorityQueue: to their priority),
  // with their attempts reset; returns how many moved. Batches of kRedriveBatch per transaction.
  std::int64_t redrive(std::int64_t n);
  // As redrive(n), all in `tr`: up to `n`, fewer if more would not fit in what is left of the
  // engine's byte limit (at least one if there is one). Throws invalid_option_value for n < 0.
  std::int64_t redrive(Transaction& tr, std::int64_t n);
  // Runs move_batch(size) for batches of up to kRedriveBatch until `n` (>= 0, else
  // invalid_option_value) moved or a batch moved none; returns how many moved.
  static std::int64_t redrive_in_batches(std::int64_t n,
                                         const std::function<std::int64_t(int)>& move_batch);
  std::vector<DeadLetter> peek_dead_letters(Transaction& tr, int n) { return dead_.peek(tr, n); }
  QueueStats stats(Transaction& tr);
  // Removes every lease and delayed item (Queue::clear).
  void clear(Transaction& tr);

  // The counter of delayed items: every delayed push and every nack with a delay writes it (a
  // blocking wait watches it, as no push happens then).
  const std::string& delayed_key() const { return keys_.delayed(); }
  const Subspace& dead_subspace() const { return dead_.subspace(); }
  const std::shared_ptr<Database>& db() const { return db_; }

  static constexpr int kReleasePerOp = 8;
  static constexpr int kRedriveBatch = 32;

 private:
  struct Held {  // a live lease, read through its fence
    std::string fence, due_key, value;
    Timer timer;
  };
  Held hold(Transaction& tr, const Lease& lease, bool with_value);
  void push_delayed(Transaction& tr, std::string_view value, std::int64_t priority,
                    std::int64_t due, const std::string& id);
  void release(Transaction& tr, const Timer& timer, const std::string& value);
  // Makes the item of `timer` (a lease's, or a delayed one placed by place_delayed) ready at its
  // place.
  void to_ready(Transaction& tr, const Timer& timer, const std::string& value);
  // Gives each delayed timer of `timers` whose item goes to the back (no place yet) a place
  // behind the items pushed before, in timer order (fresh_item_keys: one round trip on etcd for
  // all of them, not one each).
  void place_delayed(Transaction& tr, std::vector<Timer>& timers);
  // The held place (ItemRange::held_prefix) of the item whose key without attempts is `base`:
  // set while the item is out on lease, so that pushes go behind it.
  std::string held(std::string_view base) const;
  bool exhausted(int attempts) const;
  void add(Transaction& tr, const std::string& key, std::int64_t delta);
  std::int64_t counter(Transaction& tr, const std::string& key);
  std::optional<std::chrono::milliseconds> front_age(Transaction& tr);

  std::shared_ptr<Database> db_;
  Subspace subspace_;
  bool prioritized_;
  int max_attempts_;
  contention::ItemRange items_;
  WorkKeys keys_;
  std::string tag_;
  DeadLetters dead_;
  Markers markers_;
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_WORK_ITEMS_H_
