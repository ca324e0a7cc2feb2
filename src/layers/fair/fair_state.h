// Internal: what the copies of one kvq::FairQueue share, and the operations that need the index
// and the tenants' queues together: serving a turn (pop, take), waking tenants on pushes, acks and
// nacks, combined pops (options.combine; their passes over the ring: fair_turns.cc),
// high-contention pops (options.high_contention: fair_staging.cc) and the blocking waits. Each
// tenant's items are a kvq::Queue (under FairKeys::tenant_items), used only through its
// Transaction& overloads, so one fair operation is one transaction. Thread-safe.
#ifndef KVQ_SRC_LAYERS_FAIR_FAIR_STATE_H_
#define KVQ_SRC_LAYERS_FAIR_FAIR_STATE_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "kvq/database.h"
#include "kvq/fair_queue.h"
#include "kvq/queue.h"
#include "layers/combining/combiner.h"
#include "layers/contention/fulfiller.h"
#include "layers/contention/marked_run.h"
#include "layers/contention/markers.h"
#include "layers/contention/staged_pop.h"
#include "layers/fair/fair_index.h"
#include "layers/fair/fair_keys.h"
#include "layers/fair/tenant_items.h"

namespace kvq::detail {

class ItemStore;
class WorkItems;

class FairState {
 public:
  // Throws invalid_argument for a null db, invalid_option_value for negative options.
  FairState(std::shared_ptr<Database> db, Subspace space, FairQueueOptions options);

  // `tenant`'s items (after FairKeys::check_tenant); every change of its ready count also goes to
  // FairKeys::ready_total in the same transaction. The item stores of up to kCachedTenants
  // tenants are kept (all dropped when full), so repeated operations on a tenant neither rebuild
  // its store nor lose its end-window hints (contention/end_windows.h: on etcd, a read at the
  // front of a deep tenant's items would otherwise count all of them). Pops do not build stores
  // (tenant_items.h) unless the tenant has due timers.
  Queue tenant_queue(std::string_view tenant) const;
  // The item store of tenant_queue(tenant), from the same cache.
  std::shared_ptr<ItemStore> tenant_store(std::string_view tenant) const;
  // A push of `value` to `tenant`, ready now, without building the tenant's Queue (TenantItems).
  void push_ready(Transaction& tr, std::string_view tenant, std::string_view value) {
    tenant_items_.push(tr, tenant, value);
  }
  // Blind writes of a push to `tenant` (due_us 0: ready now): its wake-up, its registry entry and
  // the change counter.
  void pushed(Transaction& tr, std::string_view tenant, std::int64_t due_us) const;

  // One turn: files due wake-ups, then serves the first tenant of the ring with `serve` (the
  // tenant, the transaction, the time of the turn in unix µs: timers due by then count; nullopt
  // if the tenant has nothing for it: it leaves the ring and the next one is tried). nullopt if no
  // tenant could be served.
  template <typename T>
  using Serve =
      std::function<std::optional<T>(const std::string& tenant, Transaction&, std::int64_t now)>;
  std::optional<FairItem> pop(Transaction& tr);
  std::optional<Lease> take(Transaction& tr, std::chrono::milliseconds vt);

  // The own-loop forms: marked transactions, each retiring at most kRetirePerTransaction tenants.
  // pop() is combined with the pops of other threads if options.combine.
  std::optional<FairItem> pop();
  std::optional<Lease> take(std::chrono::milliseconds vt);
  // Blocking forms: try until a value comes or `timeout` (>= 0) passes (nullopt), waiting on a
  // watch of the change counter (and for the next wake-up's due time) in between. Throws
  // timed_out if the time ran out while an attempt's commits kept failing (layers/waiting.h).
  std::optional<FairItem> pop_wait(std::chrono::milliseconds timeout);
  std::optional<Lease> take_wait(std::chrono::milliseconds vt, std::chrono::milliseconds timeout);

  // The work items of `tenant`'s queue (its leases: FairQueue's ack, nack and extend).
  WorkItems& tenant_work(std::string_view tenant) const;
  // After an ack, nack or extend of `lease`, whose timer was due at `was_due_us` (its deadline as
  // the last extend left it): cancels the lease's wake-up, and wakes the tenant at `due_us`
  // (nullopt: no new wake-up).
  void leased_changed(Transaction& tr, const Lease& lease, std::int64_t was_due_us,
                      std::optional<std::int64_t> due_us, std::string_view id = {}) const;
  // After an ack or nack of `lease` (its item ready again at `due_us`; nullopt for an ack): as
  // leased_changed, and a wake-up at once too, because the tenant may be out of the ring waiting
  // for one of its leases to end (a take under a lease limit retires a tenant at its limit; a
  // nack with a delay would otherwise bring it back only when its item is due). Whatever this
  // object's own options: the take that retired the tenant may be another object's or
  // process's, with a limit this one does not have.
  void lease_ended(Transaction& tr, const Lease& lease, std::int64_t was_due_us,
                   std::optional<std::int64_t> due_us) const;

  template <typename Body>
  auto run_marked(Body&& body, const TransactionOptions& options = {}) {
    return detail::run_marked(*db_, markers_, std::forward<Body>(body), options);
  }

  Database& db() const { return *db_; }
  const FairKeys& keys() const { return keys_; }
  const FairIndex& index() const { return index_; }
  const FairQueueOptions& options() const { return options_; }

  static constexpr int kRetirePerTransaction = 16;
  static constexpr std::size_t kCachedTenants = 256;

 private:
  // At most one served turn; `done` false if kRetirePerTransaction tenants left the ring first,
  // or if none was ready but more wake-ups may be due than it filed (the caller commits and goes
  // on).
  template <typename T>
  struct Turn {
    bool done = true;
    std::optional<T> value;
  };
  template <typename T>
  Turn<T> serve(Transaction& tr, const Serve<T>& serve_one, int max_retired);
  // serve() in marked transactions until a turn is done; options.timeout, if any, bounds them all
  // (transaction_timed_out once it passed).
  template <typename T>
  std::optional<T> serve_marked(const Serve<T>& serve_one, const TransactionOptions& options = {});
  Serve<Lease> taker(std::chrono::milliseconds vt) const;
  // Whether `tenant` has options.max_leased_per_tenant items leased (a limit is set): its leased
  // counter, read as a snapshot, so that takes below the limit do not conflict with the tenant's
  // acks; at the limit read again with a read conflict, so that an ack, nack or expiry committed
  // meanwhile (which wakes the tenant) makes the take retry rather than retire the tenant and
  // clear that wake-up.
  bool at_lease_limit(Transaction& tr, std::string_view tenant) const;
  // The read at_lease_limit makes first (none without a limit), for Transaction::prefetch.
  std::vector<contention::OwnedRead> lease_limit_reads(std::string_view tenant) const;
  // Up to `n` (>= 1) items from the front of `tenant`'s items, as its Queue::pop_batch(tr, n)
  // (through tenant_items_, or the tenant's Queue if it has timers due by `now_us` to move first),
  // fewer than n telling what `short_batch` says (fitting.h; the tenant's Queue: kMeansNoMore).
  std::vector<std::string> pop_tenant(Transaction& tr, const std::string& tenant, std::size_t n,
                                      std::int64_t now_us, ShortBatch short_batch);
  // pop_tenant through the tenant's Queue (which moves its due timers first).
  std::vector<std::string> pop_through_queue(Transaction& tr, const std::string& tenant,
                                             std::size_t n);
  // Takes `entry`'s tenant out of the ring (a turn found it without an item it may serve) and, if
  // it has a timer, wakes it when its first timer is due (a snapshot read of it: a timer written
  // meanwhile comes with a wake-up of its own). The wake-ups its timers came with may have been
  // used up already: by the filing that put it in this turn's way, with a clock ahead of this
  // turn's (another process, another machine), for which a timer was due that is not due for
  // this turn; or, if the timers a turn moved (WorkItems::kReleasePerOp at most) all went to dead
  // letters, with due timers left behind them.
  void retire(Transaction& tr, const RingEntry& entry) const;
  // A turn's pop: the front item of the tenant, nullopt if it has none.
  Serve<FairItem> popper();
  // Before a single pop's (or `take`'s) turn at `now` (µs), on engines whose reads take round
  // trips: hints the turn's first reads (the due wake-ups, the ring's head) together with the
  // first reads of the tenant guessed to be at the head (next_head_), so that a right guess saves
  // the turn a round trip.
  void hint_guessed_turn(Transaction& tr, std::int64_t now, bool take);
  // Remembers the tenant at the head once `served` (the head a turn just served) moved on.
  void guess_next_head(const FairIndex::Head& served);
  // pop() combined with other threads' (options.combine); throws timed_out or
  // transaction_timed_out if its group could not pop by `deadline` (SteadyTime::max(): none).
  std::optional<FairItem> combined_pop(common::SteadyTime deadline);
  // Combined pops: the leader serves its group in as few marked transactions as the engine's
  // limits allow, in the order single pops would serve them.
  void serve_pops(std::vector<combining::Request*>& group);
  // Up to `n` pops in one transaction at `now` (µs): the staged items first (high-contention
  // mode), then turns_that_fit. nullopt for each pop left if nothing is ready.
  std::vector<std::optional<FairItem>> pops_that_fit(Transaction& tr, std::size_t n,
                                                     std::int64_t now);
  // The first reads of pops_that_fit(tr, n, now) (the staged items, the due wake-ups, the ring's
  // window) and `also`, handed to Transaction::prefetch together if reads take round trips (one
  // on etcd instead of three or four).
  void hint_pop_reads(Transaction& tr, std::size_t n, std::int64_t now,
                      std::span<const contention::OwnedRead> also = {}) const;
  // Up to `n` pops in one pass over the ring at `now` (µs: wake-ups and timers due by then count):
  // a read of its first n + 1 entries, then one pop_batch per tenant of as many items as its
  // credit (all n if it is alone in the ring), its entry advanced once for them; another pass if
  // tenants left the ring. nullopt for each pop left if no tenant has a ready item. Fewer if
  // `limits` or kRetirePerTransaction are reached, or if a tenant had fewer items than its turns:
  // its read conflicts only up to the last item taken (ShortBatch::kSaysNothing), so pushes to it
  // meanwhile do not conflict, and the pops left go to the caller's next transaction (only a read
  // that finds a tenant empty retires it).
  std::vector<std::optional<FairItem>> turns_that_fit(Transaction& tr, std::size_t n,
                                                      const TransactionLimits& limits,
                                                      std::int64_t now);
  // The most one tenant's turns added to a transaction so far (turns_that_fit).
  struct TurnCosts {
    std::size_t ops = 0, bytes = 0;
    TransactionUsage before;  // the usage when the turn began
    // Notes what the turn since `before` added; whether one more such turn and the marker fit.
    bool room_after_turn(Transaction& tr, const TransactionLimits& limits);
  };
  // A window's turns read ahead: fronts[i] for ring entry i, if read; entries before `end` read
  // or hinted.
  struct ReadAhead {
    std::vector<std::optional<TenantItems::Front>> fronts;
    std::size_t end = 0;
  };
  // Reads ahead the turns of ring[from...] (for engines whose reads take round trips): those of
  // as many tenants as `limits` leave room for at `turn_ops` operations a turn (all if 0: none
  // served yet), and one more. Their first reads are hinted (TenantItems::prefetch), and the
  // fronts of those with one turn (credit 1, not `alone`) that the `left` pops reach are read
  // together into ahead.fronts (TenantItems::fronts: a tenant found empty costs no round trip of
  // its own); ahead.end becomes the index after the last tenant read ahead.
  void read_turns_ahead(Transaction& tr, const std::vector<RingEntry>& ring, std::size_t from,
                        bool alone, std::size_t left, std::size_t turn_ops,
                        const TransactionLimits& limits, std::int64_t now_us, ReadAhead& ahead);
  // One turn's pop of `tenant` from `front` (read ahead in this transaction), or through its
  // Queue if it has timers due.
  std::vector<std::string> pop_front(Transaction& tr, const std::string& tenant,
                                     TenantItems::Front front);

  // ---- high-contention mode (fair_staging.cc) ----
  // The staging range (FairKeys::staging) as the fulfiller's item range.
  contention::ItemRange staging_range() const;
  // The read of take_staged(tr, n).
  contention::OwnedRead staged_read(std::size_t n) const;
  // Up to `n` items from the front of the staging range (read with a conflict), removed.
  std::vector<FairItem> take_staged(Transaction& tr, std::size_t n);
  // The fulfiller's refill (contention::Refill): the items of up to `n` turns moved into the
  // staging range, in turn order (passes over the ring that only retire emptied tenants repeat
  // while `room` allows).
  contention::Refilled stage_turns(Transaction& tr, std::size_t n, const TransactionLimits& room);
  // What one pass of turns_that_fit(tr, n, ...) that only retires tenants may add to a
  // transaction, in engine operations (etcd), at most: the window read, and each tenant's reads
  // and retirement.
  static std::size_t retire_pass_ops(std::size_t n) {
    return n + 1 + static_cast<std::size_t>(kRetirePerTransaction) * 8;
  }
  // The same in bytes, generously: the keys of its wake-ups, filings and retirements (each well
  // under 1 KiB with the longest tenant).
  static constexpr std::size_t kRetirePassBytes = 64 * 1024;
  // `n` pops (a combined group, or one): one marked attempt at pops_that_fit unless requests are
  // waiting; if they are, or the attempt conflicts, staged as one request behind them. Between 1
  // and n results, as pops_that_fit (n nullopt if nothing was ready). Throws timed_out if the
  // staged pops are not answered by `deadline` (StagedPops).
  using Clock = contention::StagedPops::Clock;
  std::vector<std::optional<FairItem>> contended_pops(
      std::size_t n, Clock::time_point deadline = Clock::time_point::max());
  // The attempt of contended_pops; nullopt if the pops must be staged.
  std::optional<std::vector<std::optional<FairItem>>> pops_fast(std::size_t n);
  std::vector<std::optional<FairItem>> pops_staged(std::size_t n, Clock::time_point deadline);
  // The loop of pop_wait and take_wait (`name` names it in errors): attempt(options) (its
  // transactions bounded by options.timeout: the time left, at least kWaitAttemptFloor) until it
  // returns a value or `timeout` passes (nullopt); between attempts it sleeps on a watch of the
  // change counter, until the next wake-up's due time at the latest. Throws timed_out if an
  // attempt ran out of time (layers/waiting.h).
  template <typename T>
  std::optional<T> wait(std::string_view name,
                        const std::function<std::optional<T>(const TransactionOptions&)>& attempt,
                        std::chrono::milliseconds timeout);

  // What a wait's arming transaction (arm) leaves: a watch of the change counter, whether a tenant
  // was in the ring (it may have a ready item although the attempt found none: pops file and
  // serve tenants without writing the change counter) and the next wake-up's due time.
  struct ArmedWait {
    std::array<Watch, 1> watch;
    bool ring_filled = false;
    std::optional<std::int64_t> next_due;
  };
  // The arming transaction of a wait, bounded by `options`: the watch, and snapshot reads of the
  // ring's first entry and of the first wake-up.
  ArmedWait arm(const TransactionOptions& options) const;

  std::shared_ptr<Database> db_;
  bool hint_reads_;  // db_->reads_take_round_trips(): prefetch the reads of a turn's tenants
  FairKeys keys_;
  FairIndex index_;
  TenantItems tenant_items_;
  FairQueueOptions options_;
  QueueOptions tenant_options_;
  Markers markers_;
  std::unique_ptr<combining::Combiner> pops_;       // options.combine only
  contention::ItemRange staging_;                   // options.high_contention only:
  std::unique_ptr<contention::StagedPops> staged_;  // its waiting pops and fulfiller
  // The tenant the last single pop or take of this object left at the ring's head, noted before
  // its commit (a guess: the commit may fail, other objects and processes pop too); "" for none
  // yet.
  std::mutex head_mu_;
  std::string next_head_;
  std::string last_served_;  // the tenant that turn served
  // tenant_queue's cache of item stores, by tenant.
  mutable std::mutex stores_mu_;
  mutable std::map<std::string, std::shared_ptr<ItemStore>, std::less<>> stores_;
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_FAIR_FAIR_STATE_H_
