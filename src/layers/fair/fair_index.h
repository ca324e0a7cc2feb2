// Internal: the index of a FairQueue's tenants (fair_keys.h has the keys; docs/queues.md, "Fair
// queues", the conflict arguments). The ring lists the tenants that may have ready items, in turn
// order; pops read only its first entries, so tenants without ready items cost nothing.
//
// Invariant: every tenant with a ready item is filed in the ring or has a due wake-up. Pushes keep
// it with a blind write (a wake-up: no read, no conflict, and repeated pushes of one tenant write
// the same key); every pop and take first files the tenants of up to kFilePerOp due wake-ups
// (a snapshot read of the wake-ups and a non-snapshot read of each one's `filed` key, so two pops
// filing one tenant conflict), and a tenant leaves the ring only when a pop found it empty (a
// non-snapshot read of its items, so a push committed meanwhile makes that pop retry) or at its
// lease limit (its leases' wake-ups bring it back).
#ifndef KVQ_SRC_LAYERS_FAIR_FAIR_INDEX_H_
#define KVQ_SRC_LAYERS_FAIR_FAIR_INDEX_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/database.h"
#include "layers/fair/fair_keys.h"

namespace kvq::detail {

class FairIndex {
 public:
  static constexpr int kFilePerOp = 16;

  explicit FairIndex(const FairKeys& keys) : keys_(keys) {}

  // Blind write: `tenant` may have ready items from `due_us` on (0: now). `id` tells wake-ups of
  // one tenant and time apart ("" for pushes: they collapse into one key).
  void wake(Transaction& tr, std::string_view tenant, std::int64_t due_us,
            std::string_view id = {}) const;
  // Blind clear of a wake-up written by wake(tr, tenant, due_us, id).
  void cancel_wake(Transaction& tr, std::string_view tenant, std::int64_t due_us,
                   std::string_view id) const;
  // Files the tenants of up to kFilePerOp due wake-ups at the back of the ring (unless filed
  // already) and clears those wake-ups.
  void file_due(Transaction& tr) const;
  // The ring's first `n` (>= 1) entries in turn order, read with a read conflict (two pops of one
  // turn conflict; on the whole ring if it holds fewer: then no tenant can be filed meanwhile
  // without a conflict, and one entry read when more were asked for is alone in the ring).
  std::vector<RingEntry> window(Transaction& tr, int n) const;
  // Takes `entry`'s tenant out of the ring.
  void retire(Transaction& tr, const RingEntry& entry) const;
  // The ring's back as one pass over the ring last saw it: read once, then the entries the pass
  // moved there (a pass that advances many tenants in one transaction reads the back once).
  struct Back {
    bool known = false;
    std::int64_t turn = 0;  // 0: the ring was empty
    std::string key;
  };
  // `entry`'s tenant was served `served` (>= 1) times in a row: it keeps the turn while it has
  // credit left, else it goes to the back of the ring with its weight as credit (its `filed` key
  // stays). More than its credit only if it is alone in the ring: it keeps its key, and its credit
  // is what that many single turns would leave (a new round of `weight` turns whenever one runs
  // out). `alone`: the caller read the whole ring and found only `entry` (saves reading its back).
  // `back`: the pass's Back (null: read the back if needed); only this pass may have changed the
  // ring in `tr` since it was filled (an entry it retired meanwhile may stay in it: an entry
  // placed after it is still after every other).
  void advance(Transaction& tr, const RingEntry& entry, std::int64_t served, bool alone,
               Back* back = nullptr) const;
  // The tenant's weight (snapshot read; 1 unless set).
  std::int64_t weight(Transaction& tr, std::string_view tenant, bool snapshot = true) const;

 private:
  // The ring's last entry (a snapshot read); nullopt if no tenant is filed.
  std::optional<RingEntry> last(Transaction& tr) const;
  // Files `tenant` in the ring at turn `after` + 1, with its weight as credit, and marks it filed.
  void file(Transaction& tr, std::string_view tenant, std::int64_t after) const;
  // Writes `tenant`'s ring entry at turn `after` + 1, with its weight as credit; returns its key.
  std::string place(Transaction& tr, std::string_view tenant, std::int64_t after) const;

  const FairKeys& keys_;
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_FAIR_FAIR_INDEX_H_
