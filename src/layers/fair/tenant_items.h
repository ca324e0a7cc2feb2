// Internal: a FairQueue's plain pushes to, and a turn's pops from, one tenant's items without
// building the tenant's Queue (its ItemStore: about 30 heap allocations, the largest single cost
// of a turn or a push when many tenants are active, with FairState's cache of stores too small to
// hold them). The keys they need (the tenant's item subspace, its item range with its end-window
// hints, the due-timer range) are computed once per tenant and kept in a map of up to
// kKeptTenants tenants (cleared when full); a push reads and writes exactly what
// tenant_queue(tenant).push(tr, value) would, a pop what tenant_queue(tenant).pop_batch(tr, n)
// would. A pass over many tenants can read their fronts ahead, together, as snapshots (fronts),
// and then pop each from what was read with the read conflict its own read would have added
// (pop_front). Thread-safe.
#ifndef KVQ_SRC_LAYERS_FAIR_TENANT_ITEMS_H_
#define KVQ_SRC_LAYERS_FAIR_TENANT_ITEMS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kvq/database.h"
#include "kvq/subspace.h"
#include "layers/contention/control.h"
#include "layers/contention/owned_read.h"
#include "layers/fair/fair_keys.h"
#include "layers/fitting.h"

namespace kvq::detail {

class TenantItems {
 public:
  static constexpr std::size_t kKeptTenants = 16'384;

  // Pops of the tenants of the fair queue with keys `keys` (which must outlive this object).
  explicit TenantItems(const FairKeys& keys) : keys_(keys) {}

  // Appends `value` (checked: value_too_large over kMaxValueSize), ready now, at the back of
  // `tenant`'s items, as the tenant's Queue::push(tr, value): a snapshot read of its last
  // position (so pushes never conflict), the item, and the tenant's and the fair queue's size
  // counters.
  void push(Transaction& tr, std::string_view tenant, std::string_view value);
  // Up to `n` (>= 1) items from the front of `tenant`'s items, removed, as the tenant's
  // Queue::pop_batch(tr, n) returns them (with the same reads, writes and read conflicts, cut to
  // `limits` the same way), except that fewer than n tells what `short_batch` says (fitting.h).
  // nullopt, after one snapshot read of its first timer, if the tenant has a timer due by
  // `now_us` (an expired lease or a due delayed item): then the caller pops through the tenant's
  // Queue, which moves the due timers first.
  std::optional<std::vector<std::string>> pop(Transaction& tr, std::string_view tenant,
                                              std::size_t n, const TransactionLimits& limits,
                                              std::int64_t now_us, ShortBatch short_batch);
  // When `tenant`'s first timer (a lease's deadline, a delayed item's due time) is due, in unix
  // µs, whether or not it is due by now; nullopt if it has none. A snapshot read of one timer,
  // the same read pop, fronts and first_reads make.
  std::optional<std::int64_t> first_timer_due(Transaction& tr, std::string_view tenant) const;
  // What pop(tr, tenant, 1, ...) reads first, read ahead by fronts().
  struct Front {
    bool timers_due = false;       // the tenant has a timer due: pop through its Queue
    std::optional<KeyValue> item;  // its first item, if it has one
  };
  // The fronts of `tenants` at `now_us`: what pop(tr, tenant, 1, limits, now_us, ...) reads of
  // each (its due timers, its first item), read as snapshots, all of them in two round trips on
  // etcd (end_windows.h read_ends) where pops one by one make one or two each. No read conflict:
  // pop_front adds the one pop would have added, for the tenants it serves.
  std::vector<Front> fronts(Transaction& tr, std::span<const std::string_view> tenants,
                            std::int64_t now_us);
  // pop(tr, tenant, 1, ...) with `front` (fronts() of `tenant` in this transaction, no write to
  // the tenant's items since): the read conflict of its reads, the item's clear and counters.
  // nullopt if the tenant has timers due (pop through its Queue), else its item or none.
  std::optional<std::vector<std::string>> pop_front(Transaction& tr, std::string_view tenant,
                                                    Front front);
  // The first two reads that pop(tr, tenant, n, ...) makes for each of `tenants` (its first
  // timer and its front item; the same for any n and time), for Transaction::prefetch, so that an
  // engine with round trips fetches them for all of these tenants in one.
  std::vector<contention::OwnedRead> first_reads(std::span<const std::string_view> tenants);
  // Hands first_reads(tenants) to tr.prefetch.
  void prefetch(Transaction& tr, std::span<const std::string_view> tenants);

 private:
  // One tenant's keys (immutable once made; shared with pops in flight when the map is cleared).
  struct Keys {
    Subspace space;               // the tenant's Queue's subspace (FairKeys::tenant_items)
    contention::ItemRange items;  // with its end-window hints and the fair queue's ready total
    Subspace control;             // the tenant's queue's control subspace
    std::string timers_begin, timers_end;  // its timers' range, by due time (due_timers)
  };
  std::shared_ptr<const Keys> keys_of(std::string_view tenant) const;
  // A snapshot read of the first timer of the tenant of `k`, due or not: both whether a pop must
  // move due timers first (due_by) and, for a tenant that leaves the ring, when to wake it
  // (first_timer_due). One read for both, so on etcd a retirement reads nothing more (a prefetched
  // answer serves every read of its request).
  static contention::OwnedRead first_timer_read(const Keys& k);
  // Whether `first_timer` (what first_timer_read read) is due by `now_us`.
  static bool due_by(const Keys& k, const std::vector<KeyValue>& first_timer, std::int64_t now_us);
  // Whether the tenant of `k` has a timer due by `now_us` (first_timer_read, then due_by).
  static bool timers_due(Transaction& tr, const Keys& k, std::int64_t now_us);

  const FairKeys& keys_;
  mutable std::mutex mu_;
  // Hashes a tenant given as a string or a string_view (lookups by string_view copy nothing).
  struct TenantHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view tenant) const noexcept {
      return std::hash<std::string_view>{}(tenant);
    }
  };
  mutable std::unordered_map<std::string, std::shared_ptr<const Keys>, TenantHash, std::equal_to<>>
      kept_;
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_FAIR_TENANT_ITEMS_H_
