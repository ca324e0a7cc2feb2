#include "layers/fair/tenant_items.h"

#include "kvq/tuple.h"
#include "layers/contention/end_windows.h"
#include "layers/fitting.h"
#include "layers/item_keys.h"
#include "layers/work_keys.h"

namespace kvq::detail {

std::shared_ptr<const TenantItems::Keys> TenantItems::keys_of(std::string_view tenant) const {
  {
    std::lock_guard lock(mu_);
    if (auto it = kept_.find(tenant); it != kept_.end()) return it->second;
  }
  // The keys ItemStore and WorkItems compute for the tenant's Queue (item_store.cc).
  const Subspace items = keys_.tenant_items(tenant);
  Subspace control = keys_.tenant_control(tenant);
  KeyRange timers = due_timers(control);
  auto made = std::make_shared<const Keys>(
      Keys{items, item_range_of(items, /*prioritized=*/false, keys_.ready_total()),
           std::move(control), std::move(timers.begin), std::move(timers.end)});
  std::lock_guard lock(mu_);
  if (kept_.size() >= kKeptTenants) kept_.clear();
  kept_.emplace(std::string(tenant), made);
  return made;
}

namespace {

// The read of a tenant's first timer (a snapshot read: the one that would be moved first).
constexpr RangeOptions kFirstTimerRead{.limit = 1, .snapshot = true};

}  // namespace

void TenantItems::push(Transaction& tr, std::string_view tenant, std::string_view value) {
  check_item_value(value);
  const std::shared_ptr<const Keys> k = keys_of(tenant);
  tr.set(fresh_item_key(tr, k->space, k->items, /*prioritized=*/false, 0, new_item_random()),
         value);
  contention::add_size(tr, k->items, 1);
}

contention::OwnedRead TenantItems::first_timer_read(const Keys& k) {
  return {k.timers_begin, k.timers_end, kFirstTimerRead};
}

bool TenantItems::due_by(const Keys& k, const std::vector<KeyValue>& first_timer,
                         std::int64_t now_us) {
  // Timer keys sort by due time: the first is due by now_us if it sorts before the bound that
  // WorkItems::release_due reads up to.
  return !first_timer.empty() && first_timer[0].key < due_before_key(k.control, now_us);
}

std::optional<std::int64_t> TenantItems::first_timer_due(Transaction& tr,
                                                         std::string_view tenant) const {
  const std::shared_ptr<const Keys> k = keys_of(tenant);
  const contention::OwnedRead read = first_timer_read(*k);
  const std::vector<KeyValue> first = tr.get_range(read.begin, read.end, read.options);
  if (first.empty()) return std::nullopt;
  return WorkKeys(k->control).parse_due(first[0].key).due_us;
}

bool TenantItems::timers_due(Transaction& tr, const Keys& k, std::int64_t now_us) {
  const contention::OwnedRead read = first_timer_read(k);
  return due_by(k, tr.get_range(read.begin, read.end, read.options), now_us);
}

std::optional<std::vector<std::string>> TenantItems::pop(Transaction& tr, std::string_view tenant,
                                                         std::size_t n,
                                                         const TransactionLimits& limits,
                                                         std::int64_t now_us,
                                                         ShortBatch short_batch) {
  const std::shared_ptr<const Keys> k = keys_of(tenant);
  if (timers_due(tr, *k, now_us)) return std::nullopt;
  std::vector<std::string> out;
  consume_fitting(tr, k->items, limits, contention::Side::kFront, n, short_batch,
                  ItemWrites::kKeyOnly, [&](KeyValue& kv) {
                    tr.clear(kv.key);
                    out.push_back(std::move(kv.value));
                  });
  return out;
}

std::vector<TenantItems::Front> TenantItems::fronts(Transaction& tr,
                                                    std::span<const std::string_view> tenants,
                                                    std::int64_t now_us) {
  if (tenants.empty()) return {};
  std::vector<std::shared_ptr<const Keys>> keys;
  std::vector<const contention::ItemRange*> items;
  std::vector<contention::OwnedRead> dues;
  for (std::string_view tenant : tenants) {
    const Keys* k = keys.emplace_back(keys_of(tenant)).get();
    items.push_back(&k->items);
    dues.push_back(first_timer_read(*k));
  }
  std::vector<RangeRead> due_reads;  // (views of `dues`, which no longer grows)
  for (const contention::OwnedRead& r : dues) due_reads.push_back(r.view());
  std::vector<std::vector<KeyValue>> due;
  std::vector<std::vector<KeyValue>> first = contention::read_ends(
      tr, items, contention::Side::kFront, 1, /*snapshot=*/true, due_reads, &due);
  std::vector<Front> out(tenants.size());
  for (std::size_t i = 0; i < tenants.size(); ++i) {
    out[i].timers_due = due_by(*keys[i], due[i], now_us);
    if (!first[i].empty()) out[i].item = std::move(first[i][0]);
  }
  return out;
}

std::optional<std::vector<std::string>> TenantItems::pop_front(Transaction& tr,
                                                               std::string_view tenant,
                                                               Front front) {
  if (front.timers_due) return std::nullopt;
  const std::shared_ptr<const Keys> k = keys_of(tenant);
  std::vector<std::string> out;
  // What read_end's read with a conflict would have covered: up to the item, or all the items.
  contention::add_end_read_conflict(tr, k->items, contention::Side::kFront,
                                    front.item ? &front.item->key : nullptr);
  if (!front.item) return out;
  tr.clear(front.item->key);
  contention::add_size(tr, k->items, -1);
  out.push_back(std::move(front.item->value));
  return out;
}

std::vector<contention::OwnedRead> TenantItems::first_reads(
    std::span<const std::string_view> tenants) {
  std::vector<contention::OwnedRead> reads;
  reads.reserve(2 * tenants.size());
  for (std::string_view tenant : tenants) {
    const std::shared_ptr<const Keys> k = keys_of(tenant);
    reads.push_back(first_timer_read(*k));
    // consume_fitting reads one item first, whatever the batch.
    reads.push_back(contention::first_end_read(k->items, contention::Side::kFront, 1, false));
  }
  return reads;
}

void TenantItems::prefetch(Transaction& tr, std::span<const std::string_view> tenants) {
  contention::prefetch(tr, first_reads(tenants));
}

}  // namespace kvq::detail
