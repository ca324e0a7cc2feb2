// kvq/lease.h: the work-queue side of Queue and PriorityQueue: leases (take / ack / nack /
// extend), delayed pushes, dead letters and statistics (docs/queues.md, "Work queues").
//
// A take moves the front item out of sight for a visibility timeout and hands back a Lease; the
// worker acks it when done (the item is removed), nacks it (the item comes back, maybe later), or
// extends it. A lease that runs out comes back by itself with attempt + 1 (no reaper process: the
// next pop or take of the queue moves it back). The store fences leases: once an expired lease was
// moved back (and maybe taken by another worker), or once it was acked, every ack, nack or extend
// of it throws lease_lost and changes nothing.
//
// Example:
//   kvq::QueueOptions options;
//   options.max_attempts = 5;                   // then to q.dead_letters()
//   kvq::Queue q(db, kvq::Subspace(kvq::Tuple().append("jobs")), options);
//   q.push("job-1");
//   kvq::PushOptions later;
//   later.delay = std::chrono::seconds(10);
//   q.push("job-2", later);                     // due in 10 s
//   if (std::optional<kvq::Lease> l = q.take(std::chrono::seconds(30))) {
//     db->run([&](kvq::Transaction& tr) {
//       tr.set("result/" + l->value, "done");   // the worker's own write ...
//       q.ack(tr, *l);                          // ... and the ack: both or neither
//     });
//   }
//   std::string text = l->token_text();         // shell-safe; kvq::Lease::from_text(text) back
//
// Thread safety: these are plain values.
#ifndef KVQ_LEASE_H_
#define KVQ_LEASE_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvq {

// The wall clock of this client; lease deadlines and due times are its microseconds since the
// Unix epoch (docs/queues.md says what skew between clients does).
using WallClock = std::chrono::system_clock;

// One delivery of an item: returned by Queue::take, PriorityQueue::take_min / take_max.
struct Lease {
  // The item.
  std::string value;
  // Opaque bytes naming the queue, the item and this one take (25 bytes). token_text() prints it.
  std::string token;
  // 1 on the first delivery of the item, +1 for every later one (after an expired lease or a nack).
  int attempt = 0;
  // When the lease runs out unless extended (this client's clock).
  WallClock::time_point deadline;
  // The item's priority (PriorityQueue; 0 for a Queue).
  std::int64_t priority = 0;
  // The tenant the item belongs to (FairQueue; empty for Queue and PriorityQueue).
  std::string tenant;

  // The token in a form a shell passes back unchanged (base64url, no padding: [A-Za-z0-9_-]).
  std::string token_text() const;
  // A lease holding only the token `text` (as printed by token_text()), enough for ack, nack and
  // extend. Throws Error invalid_lease_token if `text` is not such a token.
  static Lease from_text(std::string_view text);
};

// The longest visibility timeout and delay the work queues accept: 10 years. Longer ones are
// invalid_option_value (a deadline that far out would overflow kvq's microsecond clock values).
inline constexpr std::chrono::milliseconds kMaxWorkDuration{315'360'000'000};

// Options of a push (Queue::push(value, PushOptions), PriorityQueue::push(value, priority, ...)).
struct PushOptions {
  // The item is invisible to pop, take and peek for this long after the push. Must be >= 0 and at
  // most kMaxWorkDuration. Default: 0 (visible at once).
  std::chrono::milliseconds delay{0};
  // ... and not before this time (this client's clock), if set: at most kMaxWorkDuration from
  // now, or the push throws invalid_option_value. The later of the two applies. Default: none.
  std::optional<WallClock::time_point> not_before;
};

// What Queue::stats() / PriorityQueue::stats() count, all in O(1).
struct QueueStats {
  std::int64_t ready = 0;         // visible items (== size())
  std::int64_t delayed = 0;       // pushed with a delay or nacked with one, not yet due
  std::int64_t leased = 0;        // taken, not yet acked, nacked or moved back
  std::int64_t dead_letters = 0;  // items in dead_letters()
  // How long ago the next item to be taken (Queue: the front item; PriorityQueue: the item take_min
  // would return) was pushed; nullopt if there is no ready item, or it was pushed by a kvq older
  // than the work-queue keys (its key holds no push time).
  std::optional<std::chrono::milliseconds> oldest_ready_age;
};

// One item of a dead-letter queue, as listed by peek_dead_letters().
struct DeadLetter {
  std::string value;
  int attempts = 0;           // deliveries it had
  std::int64_t priority = 0;  // its priority (PriorityQueue), where redrive() puts it back
  std::string reason;         // the reason nack() gave, or "visibility timeout expired"
};

}  // namespace kvq

#endif  // KVQ_LEASE_H_
