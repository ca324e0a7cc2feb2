// FairQueue's whole-queue operations (kvq/fair_queue.h): size (the ready-items total), stats (over
// the registry of tenants ever pushed to) and clear (fair_keys.h).
#include <optional>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "kvq/fair_queue.h"
#include "layers/fair/fair_state.h"

namespace kvq {
namespace {

// Every tenant ever pushed to, in tenant order (a snapshot read: conflicts with nothing).
std::vector<std::string> tenants(Transaction& tr, const detail::FairKeys& keys) {
  const KeyRange registry = keys.registry();
  RangeOptions snapshot;
  snapshot.snapshot = true;
  std::vector<std::string> out;
  for (const KeyValue& kv : tr.get_range(registry.begin, registry.end, snapshot)) {
    out.push_back(keys.registry_tenant(kv.key));
  }
  return out;
}

}  // namespace

std::int64_t FairQueue::size() {
  return state_->db().run([&](Transaction& tr) { return size(tr); });
}

std::int64_t FairQueue::size(Transaction& tr) {
  const std::optional<std::string> total = tr.get(state_->keys().ready_total(), /*snapshot=*/true);
  return total ? common::decode_le64(*total) : 0;
}

std::vector<FairTenantStats> FairQueue::stats() {
  return state_->db().run([&](Transaction& tr) {
    std::vector<FairTenantStats> out;
    for (std::string& tenant : tenants(tr, state_->keys())) {
      const QueueStats s = state_->tenant_queue(tenant).stats(tr);
      const std::int64_t weight = state_->index().weight(tr, tenant);
      out.push_back({std::move(tenant), s.ready, s.delayed, s.leased, s.dead_letters, weight});
    }
    return out;
  });
}

void FairQueue::clear() {
  state_->db().run([&](Transaction& tr) { clear(tr); });
}

void FairQueue::clear(Transaction& tr) {
  const KeyRange all = state_->keys().space().range();
  tr.clear_range(all.begin, all.end);
}

}  // namespace kvq
