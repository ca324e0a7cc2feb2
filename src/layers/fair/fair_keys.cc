#include "layers/fair/fair_keys.h"

#include <atomic>
#include <utility>

#include "kvq/error.h"
#include "kvq/fair_queue.h"

namespace kvq::detail {
namespace {

Tuple with_tenant(const char* kind, std::string_view tenant) {
  return Tuple().append(kind).append(Bytes(tenant));
}

}  // namespace

FairKeys::FairKeys(Subspace space)
    : space_(std::move(space)), wakes_begin_(space_.range(Tuple().append("w")).begin) {}

void FairKeys::check_tenant(std::string_view tenant) {
  if (tenant.empty()) throw Error(ErrorCode::kInvalidArgument, "fair queue: empty tenant");
  if (tenant.size() > FairQueue::kMaxTenantSize) {
    throw Error(ErrorCode::kInvalidArgument,
                "fair queue: tenant of " + std::to_string(tenant.size()) + " bytes (at most " +
                    std::to_string(FairQueue::kMaxTenantSize) + ")");
  }
}

Subspace FairKeys::tenant_items(std::string_view tenant) const {
  return space_.subspace(with_tenant("q", tenant));
}

Subspace FairKeys::tenant_control(std::string_view tenant) const {
  return tenant_items(tenant).subspace(Tuple().append("kvq"));
}

std::string FairKeys::ring(std::int64_t version, std::int64_t seq, std::string_view tenant) const {
  return space_.pack(Tuple().append("r").append(version).append(seq).append(Bytes(tenant)));
}

namespace {

// The tenant of an unpacked ring key: its last element in both layouts.
std::string ring_key_tenant(const Tuple& k) { return k.get_bytes(k.size() - 1).data; }

}  // namespace

RingEntry FairKeys::ring_entry(std::string key, std::string_view value) const {
  const Tuple k = space_.unpack(key);
  const Tuple v = Tuple::unpack(value);
  if (k.size() == 3) {  // the earlier layout: ("r", turn, tenant) = (credit)
    return RingEntry{std::move(key), ring_key_tenant(k), v.get_int(0), 0};
  }
  return RingEntry{std::move(key), ring_key_tenant(k), v.get_int(0), v.get_int(1)};
}

std::string FairKeys::ring_tenant(std::string_view key) const {
  return ring_key_tenant(space_.unpack(key));
}

std::string FairKeys::ring_value(std::int64_t credit, std::int64_t weight) {
  return Tuple().append(credit).append(weight).pack();
}

std::string FairKeys::filed(std::string_view tenant) const {
  return space_.pack(with_tenant("s", tenant));
}

std::string FairKeys::wake(std::int64_t due_us, std::string_view tenant,
                           std::string_view id) const {
  return space_.pack(Tuple().append("w").append(due_us).append(Bytes(tenant)).append(Bytes(id)));
}

KeyRange FairKeys::wakes_due(std::int64_t now_us) const {
  return {wakes_begin_, space_.pack(Tuple().append("w").append(now_us))};
}

KeyRange FairKeys::timed_wakes_due(std::int64_t now_us) const {
  return {space_.pack(Tuple().append("w").append(1)),
          space_.pack(Tuple().append("w").append(now_us))};
}

std::string FairKeys::wake_tenant(std::string_view key) const {
  return space_.unpack(key).get_bytes(2).data;
}

std::int64_t FairKeys::wake_due_us(std::string_view key) const {
  return space_.unpack(key).get_int(1);
}

std::string FairKeys::registered(std::string_view tenant) const {
  return space_.pack(with_tenant("t", tenant));
}

std::string FairKeys::registry_tenant(std::string_view key) const {
  return space_.unpack(key).get_bytes(1).data;
}

std::string FairKeys::weight(std::string_view tenant) const {
  return space_.pack(with_tenant("wt", tenant));
}

std::string FairKeys::staged(std::int64_t version, std::int64_t seq,
                             std::string_view tenant) const {
  return space_.pack(Tuple().append("h").append(version).append(seq).append(Bytes(tenant)));
}

std::string FairKeys::staged_tenant(std::string_view key) const {
  return space_.unpack(key).get_bytes(3).data;
}

std::int64_t next_placement_seq() {
  static std::atomic<std::int64_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::string pack_int(std::int64_t v) { return Tuple().append(v).pack(); }

std::int64_t unpack_int(std::string_view packed) { return Tuple::unpack(packed).get_int(0); }

}  // namespace kvq::detail
