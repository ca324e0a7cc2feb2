#include "tools/kvq/held_leases.h"

namespace kvq::cli {

std::optional<std::string> HeldLeases::check_delivery(const std::string& value,
                                                      common::SteadyTime now) const {
  const auto it = by_value_.find(value);
  if (it == by_value_.end() || now >= it->second.until) return std::nullopt;
  const auto early =
      std::chrono::duration_cast<std::chrono::milliseconds>(it->second.until - now).count();
  return "delivered while leased: " + value + " (" + std::to_string(early) +
         " ms before its lease could run out)";
}

int HeldLeases::held_by_tenant(const std::string& tenant, std::int64_t before,
                               common::SteadyTime now) const {
  int held = 0;
  for (const auto& [value, h] : by_value_) {
    held += h.tenant == tenant && h.returned < before && now < h.until ? 1 : 0;
  }
  return held;
}

void HeldLeases::taken(const Lease& lease, common::SteadyTime started, std::chrono::milliseconds vt,
                       std::int64_t returned) {
  by_value_[lease.value] = {lease.token, lease.tenant, started + vt, returned};
}

void HeldLeases::extended(const Lease& lease, common::SteadyTime started,
                          std::chrono::milliseconds vt) {
  const auto it = by_value_.find(lease.value);
  if (it == by_value_.end() || it->second.token != lease.token) return;
  it->second.until = started + vt;  // an extend may shorten the lease too
}

void HeldLeases::released(const Lease& lease) {
  const auto it = by_value_.find(lease.value);
  if (it != by_value_.end() && it->second.token == lease.token) by_value_.erase(it);
}

}  // namespace kvq::cli
