#include "layers/fair/tenant_pops.h"

#include "kvq/tuple.h"
#include "layers/fitting.h"
#include "layers/item_keys.h"
#include "layers/work_keys.h"

namespace kvq::detail {

std::shared_ptr<const TenantPops::Keys> TenantPops::keys_of(std::string_view tenant) {
  {
    std::lock_guard lock(mu_);
    if (auto it = kept_.find(tenant); it != kept_.end()) return it->second;
  }
  // The keys ItemStore and WorkItems compute for the tenant's Queue (item_store.cc).
  const Subspace items = keys_.tenant_items(tenant);
  Subspace control = items.subspace(Tuple().append("kvq"));
  std::string due_begin = due_timers(control).begin;
  auto made = std::make_shared<const Keys>(
      Keys{item_range_of(items, /*prioritized=*/false, keys_.ready_total()), std::move(control),
           std::move(due_begin)});
  std::lock_guard lock(mu_);
  if (kept_.size() >= kKeptTenants) kept_.clear();
  kept_.emplace(std::string(tenant), made);
  return made;
}

std::optional<std::vector<std::string>> TenantPops::pop(Transaction& tr, std::string_view tenant,
                                                        std::size_t n,
                                                        const TransactionLimits& limits) {
  const std::shared_ptr<const Keys> k = keys_of(tenant);
  // WorkItems::release_due's read (a snapshot read of the due timers), to see whether it has
  // anything to move.
  if (!tr.get_range(k->due_begin, due_before_key(k->control, now_us()),
                    {.limit = 1, .snapshot = true})
           .empty()) {
    return std::nullopt;
  }
  std::vector<std::string> out;
  consume_fitting(tr, k->items, limits, contention::Side::kFront, n, [&](KeyValue& kv) {
    tr.clear(kv.key);
    out.push_back(std::move(kv.value));
  });
  return out;
}

}  // namespace kvq::detail
