// Internal: the key layout of a FairQueue (docs/queues.md, "Fair queues"). After the fair queue's
// subspace prefix:
//   ("q", tenant, ...)              the tenant's items: a kvq::Queue layout of its own
//   ("r", turn, tenant)   = (credit)  the ring: tenants with ready items, in turn order; credit =
//                                     turns left in this round (its weight when filed)
//   ("s", tenant)         = ""        the tenant is filed in the ring (under some turn)
//   ("w", due_us, tenant, id) = ""    wake-ups: the tenant may have ready items from due_us on
//                                     (id: "" for pushes, so they collapse; a lease token else)
//   ("t", tenant)         = ""        every tenant ever pushed to (stats)
//   ("wt", tenant)        = (weight)  a weight other than 1
//   ("c",)                = int64     bumped by every push, nack and ack (what waits watch)
//   ("n",)                = int64     ready items over all tenants: every change of a tenant's
//                                     size counter adds to it in the same transaction (size())
//   ("kvq", "mark", ...)              idempotency markers of the own-loop operations
// Tenants are tuple byte strings (type code 0x01), so any bytes are a tenant name.
#ifndef KVQ_SRC_LAYERS_FAIR_FAIR_KEYS_H_
#define KVQ_SRC_LAYERS_FAIR_FAIR_KEYS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "kvq/subspace.h"

namespace kvq::detail {

// One ring entry, decoded.
struct RingEntry {
  std::string key;
  std::int64_t turn = 0;
  std::string tenant;
  std::int64_t credit = 1;
};

class FairKeys {
 public:
  explicit FairKeys(Subspace space);

  // Throws invalid_argument for an empty tenant or one over FairQueue::kMaxTenantSize bytes.
  static void check_tenant(std::string_view tenant);

  Subspace tenant_items(std::string_view tenant) const;
  std::string ring(std::int64_t turn, std::string_view tenant) const;
  KeyRange ring_range() const { return space_.range(Tuple().append("r")); }
  // Decodes a key and value of ring_range().
  RingEntry ring_entry(std::string key, std::string_view value) const;
  std::string filed(std::string_view tenant) const;
  std::string wake(std::int64_t due_us, std::string_view tenant, std::string_view id) const;
  // The wake-ups due before `now_us`: [("w"), ("w", now_us)).
  KeyRange wakes_due(std::int64_t now_us) const;
  // The tenant of a key of wakes_due().
  std::string wake_tenant(std::string_view key) const;
  std::string registered(std::string_view tenant) const;
  KeyRange registry() const { return space_.range(Tuple().append("t")); }
  std::string registry_tenant(std::string_view key) const;
  std::string weight(std::string_view tenant) const;
  std::string changes() const { return space_.pack(Tuple().append("c")); }
  std::string ready_total() const { return space_.pack(Tuple().append("n")); }
  Subspace control() const { return space_.subspace(Tuple().append("kvq")); }
  const Subspace& space() const { return space_; }

 private:
  Subspace space_;
};

// An int64 as a one-element tuple (the values of ring, state and weight keys) and back.
std::string pack_int(std::int64_t v);
std::int64_t unpack_int(std::string_view packed);

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_FAIR_FAIR_KEYS_H_
