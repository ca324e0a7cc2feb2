// Internal: the keys of the work-queue side of a Queue / PriorityQueue (docs/queues.md, "Work
// queues"), under its control subspace subspace + ("kvq",):
//   ("kvq", "due", due_us, id, kind, attempts, priority, base) = the item's value
//        a timer: an item out of sight until due_us (unix microseconds). kind 1 = a lease (the
//        item goes back to its own key, `base` + attempts, when the lease runs out), kind 0 = a
//        delayed item (it goes to a fresh key at the back / of its priority when due).
//   ("kvq", "tk", id)          = the due key of the live lease `id`. It exists iff the lease can
//                                still be acked, nacked or extended: the fence.
//   ("kvq", "leased"), ("kvq", "delayed")   8-byte little-endian counters (atomic_add)
//   ("kvq", "dead", ...)       the dead-letter queue: a Queue in this sub-subspace
#ifndef KVQ_SRC_LAYERS_WORK_KEYS_H_
#define KVQ_SRC_LAYERS_WORK_KEYS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "kvq/subspace.h"

namespace kvq::detail {

// One timer (a due key, decoded).
struct Timer {
  enum Kind : std::int64_t { kDelayed = 0, kLease = 1 };
  std::int64_t due_us = 0;
  std::string id;  // lease: the take id; delayed: the item's future random part
  Kind kind = kDelayed;
  int attempts = 0;           // deliveries so far
  std::int64_t priority = 0;  // PriorityQueue: where a delayed item goes when due
  std::string base;           // lease: the item's key without attempts (ItemKey::base)
  std::string tail;           // lease: what followed the attempts in its key (ItemKey::tail)
};

// The timers of the queue whose control subspace is `control`: due_timers(c) is
// WorkKeys(c).due_range(), due_before_key(c, us) is WorkKeys(c).due_before(us), and
// leased_counter(c) is WorkKeys(c).leased(), without building the other keys (a FairQueue's
// tenant pops, fair/tenant_items.h, and its lease limit).
KeyRange due_timers(const Subspace& control);
std::string due_before_key(const Subspace& control, std::int64_t unix_us);
std::string leased_counter(const Subspace& control);

class WorkKeys {
 public:
  // Keys under `control` (subspace + ("kvq",)).
  explicit WorkKeys(const Subspace& control);

  std::string due(const Timer& timer) const;
  // Decodes a due key. Throws corruption for keys kvq did not write.
  Timer parse_due(std::string_view key) const;
  // Timers due before `unix_us` are exactly the keys of [due_begin(), due_before(unix_us)).
  std::string due_before(std::int64_t unix_us) const;
  const KeyRange& due_range() const { return due_; }
  // The fence of lease `id`.
  std::string taken(std::string_view id) const;
  const KeyRange& taken_range() const { return taken_; }
  const std::string& leased() const { return leased_; }
  const std::string& delayed() const { return delayed_; }
  const Subspace& dead() const { return dead_; }

 private:
  Subspace control_;
  KeyRange due_, taken_;
  std::string leased_, delayed_;
  Subspace dead_;
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_WORK_KEYS_H_
