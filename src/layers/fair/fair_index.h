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
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/database.h"
#include "layers/contention/owned_read.h"
#include "layers/fair/fair_keys.h"

namespace kvq::detail {

class FairIndex {
 public:
  static constexpr int kFilePerOp = 16;
  // Timed wake-ups filed besides, when kFilePerOp wake-ups for now fill the first read.
  static constexpr int kTimedFilePerOp = 4;

  explicit FairIndex(const FairKeys& keys) : keys_(keys) {}

  // Blind write: `tenant` may have ready items from `due_us` on (0: now). `id` tells wake-ups of
  // one tenant and time apart ("" for pushes: they collapse into one key).
  void wake(Transaction& tr, std::string_view tenant, std::int64_t due_us,
            std::string_view id = {}) const;
  // Blind clear of a wake-up written by wake(tr, tenant, due_us, id).
  void cancel_wake(Transaction& tr, std::string_view tenant, std::int64_t due_us,
                   std::string_view id) const;
  // Files the tenants of up to kFilePerOp wake-ups due by `now_us` at the back of the ring
  // (unless filed already) and clears those wake-ups. Wake-ups for now (pushes, acks) sort first,
  // by tenant; if they fill the kFilePerOp, the oldest kTimedFilePerOp timed ones (expired leases,
  // due delayed items) are read and filed too, so that pushes to many tenants cannot hold them
  // back. A read that found kFilePerOp leaves the next (of this process) to start after them,
  // round to the start: wake-ups that pushes rewrite at every turn cannot keep later ones unread.
  // Returns whether more may be due than it read (it read kFilePerOp).
  bool file_due(Transaction& tr, std::int64_t now_us) const;
  // The first read of file_due(tr, now_us) (from where the last full one left off), and of
  // window(tr, n) (for Transaction::prefetch).
  contention::OwnedRead due_read(std::int64_t now_us) const;
  contention::OwnedRead window_read(int n) const;
  // The reads file_due makes for a due wake-up of `tenant` (its `filed` and weight keys).
  std::vector<contention::OwnedRead> filing_reads(std::string_view tenant) const;
  // The ring's first `n` (>= 1) entries in turn order, read with a read conflict (two pops of one
  // turn conflict; on the whole ring if it holds fewer: then no tenant can be filed meanwhile
  // without a conflict, and one entry read when more were asked for is alone in the ring).
  std::vector<RingEntry> window(Transaction& tr, int n) const;
  // The ring's head, read as window(tr, 2) reads it (decoding only the head), and whether it is
  // alone in the ring; nullopt if the ring is empty.
  struct Head {
    RingEntry entry;
    bool alone = false;
    std::string next_key;  // the ring key of the entry after it ("" if alone; see next_tenant)
  };
  std::optional<Head> head(Transaction& tr) const;
  // The tenant of the entry after `head` (its own if alone): the head after `head` is served
  // once and moved to the back.
  std::string next_tenant(const Head& head) const;
  // file_due(tr, now_us), then head(tr), with the two first reads made together
  // (Transaction::get_ranges: one round trip on etcd instead of two).
  struct Filed {
    std::optional<Head> head;
    bool more_due = false;  // as file_due returns
  };
  Filed file_due_and_head(Transaction& tr, std::int64_t now_us) const;
  // Takes `entry`'s tenant out of the ring.
  void retire(Transaction& tr, const RingEntry& entry) const;
  // `entry`'s tenant was served `served` (>= 1) times in a row: it keeps the turn while it has
  // credit left, else it goes to the back of the ring with its weight as credit (its `filed` key
  // stays; no read: see place()). More than its credit only if it is alone in the ring: it keeps
  // its key, and its credit is what that many single turns would leave (a new round of `weight`
  // turns whenever one runs out). `alone`: the caller read the whole ring and found only `entry`.
  void advance(Transaction& tr, const RingEntry& entry, std::int64_t served, bool alone) const;
  // The tenant's weight (1 unless set), from its weight key (a snapshot read).
  std::int64_t weight(Transaction& tr, std::string_view tenant) const;
  // Sets the tenant's weight key (cleared for 1) and, if the tenant is filed, its ring entry's
  // weight, capping the credit left in its current round at `w`: the next round has `w` turns.
  // Finding the entry is a snapshot scan of the ring (O(tenants filed); the entry and the `filed`
  // key are read with a conflict, so a turn moving the entry or filing the tenant meanwhile
  // makes one of the two retry).
  void set_weight(Transaction& tr, std::string_view tenant, std::int64_t w) const;

 private:
  // The keys and values of the ring's first `n` entries, read with a read conflict.
  std::vector<KeyValue> first(Transaction& tr, int n) const;
  // The head of a ring whose first (up to) two entries are `two`.
  std::optional<Head> head_of(std::vector<KeyValue> two) const;
  // The wake-ups to file, `first` being what `read` (a due_read(now_us)) found: if it started
  // past the start and found fewer than kFilePerOp, those before where it started, up to
  // kFilePerOp in all (a second snapshot read); then with_timed_wakes. Moves the start of the
  // next due_read. `page_full`: it read kFilePerOp (before the timed ones), so more may be due.
  struct DueWakes {
    std::vector<KeyValue> wakes;
    bool page_full = false;
  };
  DueWakes due_wakes(Transaction& tr, const contention::OwnedRead& read,
                     std::vector<KeyValue> first, std::int64_t now_us) const;
  // `wakes` and, if they are kFilePerOp wake-ups for now, the first kTimedFilePerOp timed
  // wake-ups due by `now_us` (a snapshot read).
  std::vector<KeyValue> with_timed_wakes(Transaction& tr, std::vector<KeyValue> wakes,
                                         std::int64_t now_us) const;
  // Files the tenants of the due wake-ups `wakes` (unless filed already) and clears the wake-ups;
  // whether it filed any.
  bool file_wakes(Transaction& tr, const std::vector<KeyValue>& wakes) const;
  // Files `tenant` at the back of the ring with its weight `w` (read from its weight key, which
  // this makes a read conflict, against set_weight) as credit, and marks it filed.
  void file(Transaction& tr, std::string_view tenant, std::int64_t w) const;
  // Writes `tenant`'s ring entry at the back of the ring: ("r", read version, seq, tenant), seq
  // from a process-wide counter: after every entry the transaction can see (each was placed by a
  // transaction whose read version is below its commit version, so below this read version) and
  // after the entries it placed before; no read of the ring's back.
  void place(Transaction& tr, std::string_view tenant, std::int64_t credit,
             std::int64_t weight) const;

  const FairKeys& keys_;
  // Where due_read starts: after the last wake-up that a read of kFilePerOp found ("": the start).
  mutable std::mutex due_start_mu_;
  mutable std::string due_start_;
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_FAIR_FAIR_INDEX_H_
