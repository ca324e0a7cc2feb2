// Internal: the key layout of a FairQueue (docs/queues.md, "Fair queues"). After the fair queue's
// subspace prefix:
//   ("q", tenant, ...)              the tenant's items: a kvq::Queue layout of its own
//   ("r", version, seq, tenant) = (credit, weight)
//                                     the ring: tenants with ready items, in turn order (version:
//                                     the read version of the transaction that placed the entry,
//                                     seq: its order among that transaction's entries); credit =
//                                     turns left in this round, weight = turns per round
//   ("s", tenant)         = ""        the tenant is filed in the ring (under some turn)
//   ("w", due_us, tenant, id) = ""    wake-ups: the tenant may have ready items from due_us on
//                                     (id: "" for pushes, so they collapse; a lease token else)
//   ("t", tenant)         = ""        every tenant ever pushed to (stats)
//   ("wt", tenant)        = (weight)  a weight other than 1 (copied into the ring entry when the
//                                     tenant is filed, and by set_weight if it is filed)
//   ("c",)                = int64     bumped by every push, nack and ack (what waits watch)
//   ("n",)                = int64     ready items over all tenants: every change of a tenant's
//                                     size counter adds to it in the same transaction (size())
//   ("h", version, seq, tenant) = value
//                                     high-contention mode: items taken from their tenants, in
//                                     turn order, for waiting pops (versions and seqs as the
//                                     ring's); served before any tenant's turn
//   ("hn",)               = int64     how many items are staged there (they count in ("n",) too)
//   ("kvq", ...)                      high-contention requests, slots and lease (contention/
//                                     control.h)
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
  std::string tenant;
  std::int64_t credit = 1;
  // 0 for an entry of the earlier layout ("r", turn, tenant) = (credit): read the weight key.
  std::int64_t weight = 1;
};

class FairKeys {
 public:
  explicit FairKeys(Subspace space);

  // Throws invalid_argument for an empty tenant or one over FairQueue::kMaxTenantSize bytes.
  static void check_tenant(std::string_view tenant);

  Subspace tenant_items(std::string_view tenant) const;
  // The control subspace of `tenant`'s Queue: tenant_items(tenant) + ("kvq",), where its work keys
  // live (work_keys.h).
  Subspace tenant_control(std::string_view tenant) const;
  // The ring key of `tenant` placed `seq`-th by a transaction reading at `version`.
  std::string ring(std::int64_t version, std::int64_t seq, std::string_view tenant) const;
  KeyRange ring_range() const { return space_.range(Tuple().append("r")); }
  // Decodes a key and value of ring_range() (also of the earlier layout, see RingEntry::weight).
  RingEntry ring_entry(std::string key, std::string_view value) const;
  // The tenant of a key of ring_range() (of either layout).
  std::string ring_tenant(std::string_view key) const;
  // The value of a ring entry.
  static std::string ring_value(std::int64_t credit, std::int64_t weight);
  std::string filed(std::string_view tenant) const;
  std::string wake(std::int64_t due_us, std::string_view tenant, std::string_view id) const;
  // The wake-ups due before `now_us`: [("w"), ("w", now_us)).
  KeyRange wakes_due(std::int64_t now_us) const;
  // Where every wake-up's key sorts from (wakes_due(t).begin for any t).
  const std::string& wakes_begin() const { return wakes_begin_; }
  // The timed ones among them (due_us > 0: a lease's deadline, a delayed item's due time), which
  // sort behind the wake-ups for now (due_us 0: pushes, acks): [("w", 1), ("w", now_us)).
  KeyRange timed_wakes_due(std::int64_t now_us) const;
  // The tenant and the due time of a key of wakes_due().
  std::string wake_tenant(std::string_view key) const;
  std::int64_t wake_due_us(std::string_view key) const;
  std::string registered(std::string_view tenant) const;
  KeyRange registry() const { return space_.range(Tuple().append("t")); }
  std::string registry_tenant(std::string_view key) const;
  std::string weight(std::string_view tenant) const;
  std::string changes() const { return space_.pack(Tuple().append("c")); }
  std::string ready_total() const { return space_.pack(Tuple().append("n")); }
  // The key of an item of `tenant` staged `seq`-th by a transaction reading at `version`.
  std::string staged(std::int64_t version, std::int64_t seq, std::string_view tenant) const;
  KeyRange staging() const { return space_.range(Tuple().append("h")); }
  // The tenant of a key of staging().
  std::string staged_tenant(std::string_view key) const;
  std::string staged_count() const { return space_.pack(Tuple().append("hn")); }
  Subspace control() const { return space_.subspace(Tuple().append("kvq")); }
  const Subspace& space() const { return space_; }

 private:
  Subspace space_;
  std::string wakes_begin_;
};

// The next number of a process-wide sequence: orders the keys one process places after a read
// version (ring entries, staged items) among themselves.
std::int64_t next_placement_seq();

// An int64 as a one-element tuple (the values of ring, state and weight keys) and back.
std::string pack_int(std::int64_t v);
std::int64_t unpack_int(std::string_view packed);

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_FAIR_FAIR_KEYS_H_
