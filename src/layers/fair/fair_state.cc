#include "layers/fair/fair_state.h"

#include <algorithm>
#include <limits>
#include <type_traits>

#include "common/bytes.h"
#include "common/clock.h"
#include "kvq/error.h"
#include "layers/combining/batches.h"
#include "layers/item_keys.h"
#include "layers/item_store.h"
#include "layers/waiting.h"
#include "layers/work_items.h"
#include "layers/work_keys.h"

namespace kvq::detail {
namespace {

using std::chrono::milliseconds;

std::shared_ptr<Database> non_null(std::shared_ptr<Database> db) {
  if (!db) throw Error(ErrorCode::kInvalidArgument, "fair queue: null database");
  return db;
}

const FairQueueOptions& validated(const FairQueueOptions& o) {
  if (o.max_leased_per_tenant < 0 || o.max_attempts < 0) {
    throw Error(ErrorCode::kInvalidOptionValue,
                "fair queue: max_leased_per_tenant and max_attempts must be >= 0");
  }
  // As QueueOptions::marker_ttl (the tenants' queues are built with it, later).
  if (o.marker_ttl.count() < 1) {
    throw Error(ErrorCode::kInvalidOptionValue, "fair queue: marker_ttl must be > 0");
  }
  contention::check_options(o.contention);
  return o;
}

QueueOptions tenant_options_of(const FairQueueOptions& o) {
  QueueOptions q;
  q.max_attempts = o.max_attempts;
  q.marker_ttl = o.marker_ttl;
  return q;
}

std::int64_t micros(WallClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

// A watch of the change counter and when the next wake-up is due (unix us), if there is one.

}  // namespace

FairState::FairState(std::shared_ptr<Database> db, Subspace space, FairQueueOptions options)
    : db_(non_null(std::move(db))),
      hint_reads_(db_->reads_take_round_trips()),
      keys_(with_room_for_keys(std::move(space), FairQueue::kMaxOwnKeySize, "fair queue")),
      index_(keys_),
      tenant_items_(keys_),
      options_(validated(options)),
      tenant_options_(tenant_options_of(options_)),
      markers_(db_, keys_.control(), options_.marker_ttl) {
  if (options_.combine) {
    // No follower polls: a fair group takes twice a Queue group's time to serve, so the leader,
    // not the followers' wake-ups, bounds it (polling gave the same pops/s for 25 % more CPU per
    // pop at 32 threads; docs/benchmarks.md, run G).
    pops_ = std::make_unique<combining::Combiner>(
        combining::GroupLimits{.yield_when_alone = options_.combine_favors_latency,
                               .follower_poll = std::chrono::microseconds(0)});
  }
  if (options_.high_contention) {
    staging_ = staging_range();
    staged_ = std::make_unique<contention::StagedPops>(
        db_, keys_.control(), staging_, options_.contention, markers_,
        [this](Transaction& tr, std::size_t n, const TransactionLimits& room) {
          return stage_turns(tr, n, room);
        });
  }
}

Queue FairState::tenant_queue(std::string_view tenant) const {
  return Queue(tenant_options_, tenant_store(tenant));
}

std::shared_ptr<ItemStore> FairState::tenant_store(std::string_view tenant) const {
  {
    std::lock_guard lock(stores_mu_);
    if (auto it = stores_.find(tenant); it != stores_.end()) return it->second;
  }
  auto store = std::make_shared<ItemStore>(db_, keys_.tenant_items(tenant), tenant_options_,
                                           /*prioritized=*/false, keys_.ready_total());
  std::lock_guard lock(stores_mu_);
  if (stores_.size() >= kCachedTenants) stores_.clear();
  stores_.emplace(std::string(tenant), store);
  return store;
}

void FairState::pushed(Transaction& tr, std::string_view tenant, std::int64_t due_us) const {
  index_.wake(tr, tenant, due_us);
  tr.set(keys_.registered(tenant), "");
  tr.atomic_add(keys_.changes(), 1);
}

WorkItems& FairState::tenant_work(std::string_view tenant) const {
  return tenant_store(tenant)->work();
}

void FairState::leased_changed(Transaction& tr, const Lease& lease, std::int64_t was_due_us,
                               std::optional<std::int64_t> due_us, std::string_view id) const {
  index_.cancel_wake(tr, lease.tenant, was_due_us, lease.token);
  if (due_us) index_.wake(tr, lease.tenant, *due_us, id);
  tr.atomic_add(keys_.changes(), 1);
}

void FairState::lease_ended(Transaction& tr, const Lease& lease, std::int64_t was_due_us,
                            std::optional<std::int64_t> due_us) const {
  leased_changed(tr, lease, was_due_us, due_us);
  if (due_us != 0) index_.wake(tr, lease.tenant, 0);
}

template <typename T>
FairState::Turn<T> FairState::serve(Transaction& tr, const Serve<T>& serve_one, int max_retired) {
  const std::int64_t now = now_us();
  hint_guessed_turn(tr, now, /*take=*/std::is_same_v<T, Lease>);
  // The head and whether another tenant follows it (if not, it stays in place).
  FairIndex::Filed filed = index_.file_due_and_head(tr, now);
  std::optional<FairIndex::Head> head = std::move(filed.head);
  TurnCosts costs;
  costs.before = tr.usage();
  for (int retired = 0; head; head = index_.head(tr)) {
    if (std::optional<T> v = serve_one(head->entry.tenant, tr, now)) {
      index_.advance(tr, head->entry, 1, head->alone);
      guess_next_head(*head);
      return {true, std::move(v)};
    }
    retire(tr, head->entry);
    // No read of the next head when done retiring: max_retired, or no room for another turn
    // like the largest so far (with dead letters, a turn writes several keys).
    if (++retired == max_retired || !costs.room_after_turn(tr, db_->limits())) {
      return {false, std::nullopt};
    }
  }
  // No tenant is ready. Unless more wake-ups may be due than were filed: then commit and go on.
  return {!filed.more_due, std::nullopt};
}

template <typename T>
std::optional<T> FairState::serve_marked(const Serve<T>& serve_one,
                                         const TransactionOptions& options) {
  // options.timeout bounds them all, not each transaction.
  const common::SteadyTime deadline = common::deadline_of_timeout(options.timeout);
  TransactionOptions each = options;
  for (bool first = true;; first = false) {
    if (!first && common::time_left(deadline).count() == 0) {
      throw Error(ErrorCode::kTransactionTimedOut,
                  "fair queue: the timeout passed while turns filed and retired tenants");
    }
    each.timeout = common::timeout_until(deadline);
    Turn<T> turn = run_marked(
        [&](Transaction& tr) { return serve<T>(tr, serve_one, kRetirePerTransaction); }, each);
    if (turn.done) return std::move(turn.value);
  }
}

std::vector<std::string> FairState::pop_tenant(Transaction& tr, const std::string& tenant,
                                               std::size_t n, std::int64_t now_us,
                                               ShortBatch short_batch) {
  if (auto got = tenant_items_.pop(tr, tenant, n, db_->limits(), now_us, short_batch)) {
    return std::move(*got);
  }
  return pop_through_queue(tr, tenant, n);
}

std::vector<std::string> FairState::pop_through_queue(Transaction& tr, const std::string& tenant,
                                                      std::size_t n) {
  return tenant_queue(tenant).pop_batch(tr, n);  // moves due timers first
}

void FairState::retire(Transaction& tr, const RingEntry& entry) const {
  index_.retire(tr, entry);
  if (std::optional<std::int64_t> due = tenant_items_.first_timer_due(tr, entry.tenant)) {
    index_.wake(tr, entry.tenant, *due);
  }
}

FairState::Serve<FairItem> FairState::popper() {
  return [this](const std::string& tenant, Transaction& tr,
                std::int64_t now) -> std::optional<FairItem> {
    if (hint_reads_) {
      // Its two reads in one round trip (none if hint_guessed_turn guessed it: a read fetched
      // already is not asked again).
      const std::string_view tenants[] = {tenant};
      tenant_items_.prefetch(tr, tenants);
    }
    std::vector<std::string> got = pop_tenant(tr, tenant, 1, now, ShortBatch::kMeansNoMore);
    if (got.empty()) return std::nullopt;
    return FairItem{tenant, std::move(got[0])};
  };
}

void FairState::hint_guessed_turn(Transaction& tr, std::int64_t now, bool take) {
  if (!hint_reads_) return;
  std::string guess, served;
  {
    std::lock_guard lock(head_mu_);
    guess = next_head_;
    served = last_served_;
  }
  std::vector<contention::OwnedRead> reads;
  if (!guess.empty() && take) {
    reads = tenant_store(guess)->first_reads(contention::Side::kFront, now);
    for (contention::OwnedRead& r : lease_limit_reads(guess)) reads.push_back(std::move(r));
  } else if (!guess.empty()) {
    const std::string_view tenants[] = {guess};
    reads = tenant_items_.first_reads(tenants);
  }
  // The wake-up of an ack or nack of the lease a take just made (or of a push to the tenant just
  // served) is filed by this turn: the reads that files it.
  std::vector<std::string_view> woken = {served};
  if (guess != served) woken.push_back(guess);
  for (std::string_view tenant : woken) {
    if (tenant.empty()) continue;
    for (contention::OwnedRead& r : index_.filing_reads(tenant)) reads.push_back(std::move(r));
  }
  reads.push_back(index_.due_read(now));
  reads.push_back(index_.window_read(2));
  contention::prefetch(tr, reads);
}

void FairState::guess_next_head(const FairIndex::Head& served) {
  if (!hint_reads_) return;
  // A head with turns left keeps the head (advance); else the entry after it comes next.
  std::string next = served.entry.credit > 1 ? served.entry.tenant : index_.next_tenant(served);
  std::lock_guard lock(head_mu_);
  next_head_ = std::move(next);
  last_served_ = served.entry.tenant;
}

FairState::Serve<Lease> FairState::taker(milliseconds vt) const {
  WorkItems::lease_us(vt);  // invalid_option_value before any turn, a tenant served or not
  return [this, vt](const std::string& tenant, Transaction& tr,
                    std::int64_t now) -> std::optional<Lease> {
    // The leased count is read after the tenant's expired leases moved back (so it is current),
    // and in the round trip of the item's read.
    const bool limited = options_.max_leased_per_tenant > 0;
    ItemStore::GuardedTake taken = tenant_store(tenant)->take_unless(
        tr, contention::Side::kFront, vt, lease_limit_reads(tenant),
        [&](Transaction& t) { return limited && at_lease_limit(t, tenant); }, now);
    if (taken.outcome == ItemStore::GuardedTake::kRefused) {
      return std::nullopt;  // its leases' wake-ups bring it back
    }
    if (taken.outcome == ItemStore::GuardedTake::kEmpty) return std::nullopt;
    Lease lease = std::move(*taken.lease);
    lease.tenant = tenant;
    // If the tenant leaves the ring meanwhile, the lease's expiry brings it back.
    index_.wake(tr, tenant, micros(lease.deadline), lease.token);
    return lease;
  };
}

std::vector<contention::OwnedRead> FairState::lease_limit_reads(std::string_view tenant) const {
  if (options_.max_leased_per_tenant == 0) return {};
  return {contention::point_read(leased_counter(keys_.tenant_control(tenant)))};
}

bool FairState::at_lease_limit(Transaction& tr, std::string_view tenant) const {
  const std::string key = leased_counter(keys_.tenant_control(tenant));
  auto at_limit = [&](bool snapshot) {
    const std::optional<std::string> leased = tr.get(key, snapshot);
    return leased && common::decode_le64(*leased) >= options_.max_leased_per_tenant;
  };
  return at_limit(/*snapshot=*/true) && at_limit(/*snapshot=*/false);
}

std::optional<FairItem> FairState::pop(Transaction& tr) {
  if (staged_) {
    // No overtaking of waiting high-contention pops: none if some are left waiting.
    if (!staged_->serve_all(tr)) return std::nullopt;
    std::vector<FairItem> staged = take_staged(tr, 1);
    if (!staged.empty()) return std::move(staged.front());
  }
  return serve<FairItem>(tr, popper(), std::numeric_limits<int>::max()).value;
}

std::optional<Lease> FairState::take(Transaction& tr, milliseconds vt) {
  return serve<Lease>(tr, taker(vt), std::numeric_limits<int>::max()).value;
}

namespace {

struct PopRequest : combining::Request {
  std::optional<FairItem> item;
};

}  // namespace

std::optional<FairItem> FairState::pop() {
  if (!pops_ && staged_) return std::move(contended_pops(1).front());
  if (!pops_) return serve_marked<FairItem>(popper());
  return combined_pop(common::SteadyTime::max());
}

std::optional<FairItem> FairState::combined_pop(common::SteadyTime deadline) {
  PopRequest request;
  request.deadline = deadline;
  pops_->submit(request, [this](std::vector<combining::Request*>& group) { serve_pops(group); });
  return std::move(request.item);
}

// Batches of pops_that_fit (or contended_pops) until every pop of the group has its answer, each
// bounded by the pops' deadlines (serve_in_batches). A batch answers at least one pop (nullopt
// when nothing is ready): one that only retired emptied tenants is committed and followed by
// another, as contended_pops does.
void FairState::serve_pops(std::vector<combining::Request*>& group) {
  combining::serve_in_batches(
      group, [&](std::span<combining::Request* const> pending, common::SteadyTime deadline) {
        const std::size_t n = pending.size();
        std::vector<std::optional<FairItem>> items;
        if (staged_) {
          items = contended_pops(n, deadline);
        }
        while (items.empty()) {
          TransactionOptions options;
          options.timeout = common::timeout_until(deadline);
          items = run_marked(
              [&](Transaction& tr) {
                const std::int64_t now = now_us();
                hint_pop_reads(tr, n, now);
                return pops_that_fit(tr, n, now);
              },
              options);
        }
        for (std::size_t i = 0; i < items.size(); ++i) {
          static_cast<PopRequest*>(pending[i])->item = std::move(items[i]);
        }
        return items.size();
      });
}

std::optional<Lease> FairState::take(milliseconds vt) { return serve_marked<Lease>(taker(vt)); }

template <typename T>
std::optional<T> FairState::wait(
    std::string_view name,
    const std::function<std::optional<T>(const TransactionOptions&)>& attempt,
    milliseconds timeout) {
  if (timeout.count() < 0) {
    throw Error(ErrorCode::kInvalidOptionValue, "fair queue: wait timeout must be >= 0");
  }
  const common::SteadyTime deadline = common::deadline_after(timeout);  // max() for "forever"
  VisibleStreak streak;
  for (;;) {
    TransactionOptions options;
    options.timeout = attempt_budget(common::time_left(deadline));
    if (std::optional<T> v = run_wait_attempt(name, timeout, [&] { return attempt(options); })) {
      return v;
    }
    if (common::time_left(deadline).count() == 0) return std::nullopt;
    options.timeout = attempt_budget(common::time_left(deadline));
    ArmedWait armed = run_wait_attempt(name, timeout, [&] { return arm(options); });
    milliseconds wait = streak.next(armed.ring_filled, common::time_left(deadline));
    if (armed.next_due) {
      const auto until =
          std::chrono::ceil<milliseconds>(std::chrono::microseconds(*armed.next_due - now_us()));
      wait = std::min(wait, std::max(until, kRecheck));
    }
    sleep_on(armed.watch, wait);
  }
}

FairState::ArmedWait FairState::arm(const TransactionOptions& options) const {
  return db_->run(
      [&](Transaction& tr) {
        const KeyRange wakes = keys_.wakes_due(std::numeric_limits<std::int64_t>::max());
        const KeyRange ring = keys_.ring_range();
        constexpr RangeOptions kFirst{.limit = 1, .snapshot = true};
        const RangeRead reads[] = {{wakes.begin, wakes.end, kFirst},
                                   {ring.begin, ring.end, kFirst}};
        // The watch's read of the counter too: one round trip on etcd, not two.
        if (hint_reads_) {
          const contention::OwnedRead counter = contention::point_read(keys_.changes());
          const RangeRead all[] = {reads[0], reads[1], counter.view()};
          tr.prefetch(all);
        }
        const std::vector<std::vector<KeyValue>> got = tr.get_ranges(reads);
        const std::vector<KeyValue>& next = got[0];
        return ArmedWait{{tr.watch(keys_.changes())},
                         !got[1].empty(),
                         next.empty()
                             ? std::nullopt
                             : std::optional(keys_.space().unpack(next[0].key).get_int(1))};
      },
      options);
}

std::optional<FairItem> FairState::pop_wait(milliseconds timeout) {
  return wait<FairItem>(
      "fair queue: pop_wait",
      [this](const TransactionOptions& options) {
        if (pops_) return combined_pop(common::deadline_of_timeout(options.timeout));
        if (staged_) {
          return std::move(
              contended_pops(1, common::clock().steady_now() + options.timeout).front());
        }
        return serve_marked<FairItem>(popper(), options);
      },
      timeout);
}

std::optional<Lease> FairState::take_wait(milliseconds vt, milliseconds timeout) {
  const Serve<Lease> take_one = taker(vt);
  return wait<Lease>(
      "fair queue: take_wait",
      [&](const TransactionOptions& options) { return serve_marked<Lease>(take_one, options); },
      timeout);
}

}  // namespace kvq::detail
