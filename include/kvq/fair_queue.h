// kvq/fair_queue.h: a work queue shared fairly by tenants (docs/queues.md, "Fair queues").
//
// Each tenant's items form a FIFO queue of their own (a kvq::Queue under the fair queue's
// subspace, so leases, acks, nacks, delays and dead letters work as on Queue); pops and takes
// serve the tenants that have ready items round-robin, `weight` turns per round each, FIFO within
// a tenant. Idle tenants cost nothing: only tenants with ready items are in the index that pops
// read. Pushes never conflict with each other, nor with pops: a push writes its item, a blind
// wake-up key of its tenant and counters, and reads nothing but a snapshot.
//
// Example:
//   auto db = kvq::open("memory:");
//   kvq::FairQueue fq(db, kvq::Subspace(kvq::Tuple().append("F")));
//   fq.push("acme", "job-1");
//   fq.push("globex", "job-2");
//   fq.set_weight("acme", 3);                       // acme gets 3 turns per round
//   std::optional<kvq::FairItem> item = fq.pop();   // {"acme", "job-1"}
//   if (std::optional<kvq::Lease> l = fq.take(std::chrono::seconds(30))) fq.ack(*l);
//
// Thread safety: a FairQueue may be shared by any number of threads; copies share state.
#ifndef KVQ_FAIR_QUEUE_H_
#define KVQ_FAIR_QUEUE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/database.h"
#include "kvq/lease.h"
#include "kvq/queue.h"
#include "kvq/subspace.h"

namespace kvq {

namespace detail {
class FairState;
}

// Options of a FairQueue.
struct FairQueueOptions {
  // At most this many items of one tenant are leased (taken, not yet acked, nacked or expired) at
  // once; a tenant at its limit waits, other tenants go on (a take that finds it at its limit
  // takes it out of turn until one of its leases is acked, nacked or expires; pops skip it then
  // too). 0 = no limit; < 0 is invalid_option_value. Default: 0.
  int max_leased_per_tenant = 0;
  // As QueueOptions::max_attempts, per tenant (dead letters: dead_letters(tenant)). Default: 0.
  int max_attempts = 0;
  // As QueueOptions::marker_ttl (idempotency markers of the own-loop operations). Default: 10 min.
  std::chrono::milliseconds marker_ttl{600'000};
  // Flat combining of pop() (and pop_wait()'s pops) within this process, as QueueOptions::combine:
  // threads popping from the same object at once are served by one of them in one transaction
  // (the items single pops would return, in that order: one read of the ring's first entries, one
  // batch per tenant of as many items as its turns; as many as fit in one transaction of the
  // engine). Guarantees are those of single pops. Default: false.
  bool combine = false;
  // With combine: as QueueOptions::combine_favors_latency. Default: false.
  bool combine_favors_latency = false;
  // As QueueOptions::high_contention, for pop() and pop_wait(): a pop that conflicts (with pops
  // of other processes or FairQueue objects) registers a request, and one fulfiller answers the
  // waiting requests in batches, in the order they were made, with the items single pops would
  // return (it takes them from the tenants' turns into a staging range in the same transaction;
  // docs/queues.md, "Fair queues"). With combine, a group whose pops conflict stages as one
  // request. pop(tr) serves waiting requests first. Takes do not stage (a conflicting take
  // retries) and do not see staged items: an item staged but not handed out (a batch out of room,
  // a popper that died) goes to the next pop. Measured on etcd (docs/benchmarks.md, session 11):
  // 15x fewer retries per pop, but fewer pops/s than without it, across processes too (one
  // fulfiller's batches make a round trip per tenant read); prefer combine there. Default: false.
  // Every client of one fair queue should use the same mode: only high-contention pops hand out
  // staged items (a plain pop would serve the tenant's next item ahead of its staged one, and the
  // staged one stays until a high-contention pop comes).
  bool high_contention = false;
  // Tuning of high-contention mode (as QueueOptions::contention; invalid values throw
  // invalid_option_value).
  HighContentionOptions contention;
};

// One item popped from a FairQueue.
struct FairItem {
  std::string tenant;
  std::string value;
  friend bool operator==(const FairItem&, const FairItem&) = default;
};

// One tenant's counts, as FairQueue::stats() lists them.
struct FairTenantStats {
  std::string tenant;
  std::int64_t ready = 0;    // visible items
  std::int64_t delayed = 0;  // pushed or nacked with a delay, not yet due
  std::int64_t leased = 0;   // taken, not yet acked, nacked or moved back
  std::int64_t dead_letters = 0;
  std::int64_t weight = 1;
};

class FairQueue {
 public:
  // Longest tenant name, in bytes.
  static constexpr std::size_t kMaxTenantSize = 1000;
  // The most bytes the fair queue's keys add to its subspace's prefix: a tenant's queue's keys
  // (Queue::kMaxOwnKeySize) under the tenant's name, escaped (twice its bytes at most).
  static constexpr std::size_t kMaxOwnKeySize = Queue::kMaxOwnKeySize + 2 * kMaxTenantSize + 16;

  // A fair queue stored under `subspace` of `db`. Throws invalid_argument for a null db or a
  // subspace prefix over kMaxKeySize - kMaxOwnKeySize bytes, and invalid_option_value for
  // negative options or a marker_ttl of 0. Does no I/O. The subspace is the fair queue's alone,
  // as a Queue's is.
  FairQueue(std::shared_ptr<Database> db, Subspace subspace, FairQueueOptions options = {});

  // Appends `value` at the back of `tenant`'s items (visible after options.delay /
  // options.not_before, as Queue::push). Never conflicts with other pushes or with pops. Idempotent
  // under commit_unknown_result. Throws invalid_argument for an empty tenant or one over
  // kMaxTenantSize bytes, value_too_large, invalid_option_value for a negative delay, and engine
  // errors; then nothing is written.
  void push(std::string_view tenant, std::string_view value, const PushOptions& options = {});
  // As push(...) inside the caller's transaction (no marker: idempotency is the caller's).
  void push(Transaction& tr, std::string_view tenant, std::string_view value,
            const PushOptions& options = {});
  // Appends `values` in order at the back of `tenant`'s items, in one transaction (throws as
  // Queue::push_batch, and as push for the tenant). Idempotent under commit_unknown_result.
  void push_batch(std::string_view tenant, const std::vector<std::string>& values);
  void push_batch(Transaction& tr, std::string_view tenant, const std::vector<std::string>& values);

  // Removes and returns the front item of the tenant whose turn it is: tenants with ready items
  // are served round-robin, weight(tenant) items in a row each, FIFO within a tenant. nullopt if
  // no tenant has a ready item (none in turn: a tenant a take found at its
  // options.max_leased_per_tenant is out of turn for pops too). Idempotent under
  // commit_unknown_result. Throws engine errors (in high-contention mode after withdrawing its
  // request and putting an item delivered to it back first in line, as Queue::pop).
  std::optional<FairItem> pop();
  // As pop() inside the caller's transaction, which files at most 16 due wake-ups (and 4 timed
  // ones, of expired leases or due delayed items, when the 16 are all of pushes): with more due
  // (many tenants woken at once) it may return nullopt while a tenant not yet filed has a ready
  // item; the next call files the next ones. It likewise returns nullopt when the tenants it found
  // empty (each taken out of turn) leave no room in the transaction (Database::limits()) for
  // another, and in high-contention mode when waiting pop requests are left that did not fit in
  // the transaction (it overtakes none). pop() commits and goes on until it knows.
  std::optional<FairItem> pop(Transaction& tr);
  // As pop(), but while nothing is ready it blocks (on a watch of a counter every push writes)
  // until an item comes or `timeout` (>= 0, else invalid_option_value) passes: nullopt then. As
  // Queue::pop_wait, an attempt under way may take up to 1 s more, and one whose commits keep
  // failing throws timed_out (nothing popped); with options.combine too, the attempts are bounded
  // by the timeout.
  std::optional<FairItem> pop_wait(std::chrono::milliseconds timeout);

  // Takes the front item of the tenant whose turn it is under a lease of `visibility_timeout`
  // (> 0, else invalid_option_value), as Queue::take; the Lease's `tenant` is set. A tenant with
  // options.max_leased_per_tenant items leased is skipped until one of them is acked, nacked or
  // expires. nullopt if no tenant has a ready item it may take. Idempotent under
  // commit_unknown_result.
  std::optional<Lease> take(std::chrono::milliseconds visibility_timeout);
  // As take(), inside the caller's transaction: may return nullopt early as pop(tr) may.
  std::optional<Lease> take(Transaction& tr, std::chrono::milliseconds visibility_timeout);
  // As take(), blocking as pop_wait() while nothing can be taken; timed_out as Queue::take_wait.
  std::optional<Lease> take_wait(std::chrono::milliseconds visibility_timeout,
                                 std::chrono::milliseconds timeout);

  // As Queue::ack / nack / extend, for a lease of this queue (lease.tenant must be set; a lease
  // made by Lease::from_text needs it filled in). Throw lease_lost (nothing changed) once the lease
  // is gone, invalid_lease_token for a token of another queue or tenant, invalid_argument for a
  // bad tenant.
  void ack(const Lease& lease);
  void ack(Transaction& tr, const Lease& lease);
  void nack(const Lease& lease, std::chrono::milliseconds delay = {}, std::string_view reason = {});
  void nack(Transaction& tr, const Lease& lease, std::chrono::milliseconds delay = {},
            std::string_view reason = {});
  WallClock::time_point extend(const Lease& lease, std::chrono::milliseconds visibility_timeout);
  WallClock::time_point extend(Transaction& tr, const Lease& lease,
                               std::chrono::milliseconds visibility_timeout);

  // Gives `tenant` `weight` (>= 1, else invalid_option_value) turns per round: from its next round
  // on, and at most `weight` more in its current round. Default weight: 1. Cost: if the tenant is
  // in the ring, a snapshot scan of the ring (O(tenants with ready items)).
  void set_weight(std::string_view tenant, std::int64_t weight);
  // The tenant's weight (1 unless set).
  std::int64_t weight(std::string_view tenant);

  // The dead letters of `tenant` (a Queue, as Queue::dead_letters()).
  Queue dead_letters(std::string_view tenant) const;
  // Up to `limit` dead letters of `tenant` from their front with their history, without removing
  // them (as Queue::peek_dead_letters).
  std::vector<DeadLetter> peek_dead_letters(std::string_view tenant, int limit);
  // Moves up to `n` (>= 0, else invalid_option_value) dead letters of `tenant` back to the back of
  // its items, attempts reset, and files the tenant for its turns (as a push does), in
  // transactions of up to 32; returns how many moved. Idempotent under commit_unknown_result.
  // Throws invalid_argument for a bad tenant, and engine errors.
  std::int64_t redrive(std::string_view tenant, std::int64_t n);

  // Ready items over all tenants: the sum of stats()' ready counts (as Queue::size, an item whose
  // delay or lease ran out counts once a pop or take of its tenant moved it back), plus, in
  // high-contention mode, the items staged for waiting pops (taken from their tenants' counts).
  // O(1): one snapshot read (conflicts with nothing) of a total that every change of a tenant's
  // ready items adds to in the same transaction; with `tr`, the transaction's own changes included.
  std::int64_t size();
  std::int64_t size(Transaction& tr);
  // Counts per tenant ever pushed to, in tenant order (snapshot reads): O(tenants ever pushed
  // to), as it lists each of them (a cleared queue has none).
  std::vector<FairTenantStats> stats();
  // Removes every item, lease, delayed item, dead letter and weight of every tenant: one clear of
  // the whole subspace, which takes the idempotency markers and high-contention requests of
  // operations in flight with it (unlike Queue::clear). So an own-loop operation whose commit was
  // unknown and that retries after the clear is not told what its first attempt did (a pop may
  // return another item, and the one its first attempt popped is gone). Clear a fair queue while
  // no client is using it.
  void clear();
  void clear(Transaction& tr);

  const Subspace& subspace() const;
  const FairQueueOptions& options() const;

 private:
  std::shared_ptr<detail::FairState> state_;
};

}  // namespace kvq

#endif  // KVQ_FAIR_QUEUE_H_
