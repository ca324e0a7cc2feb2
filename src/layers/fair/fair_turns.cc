// FairQueue's passes over the ring for several pops in one transaction (combined groups, and the
// high-contention refill: fair_staging.cc): a read of the ring's first entries, one batch per
// tenant of as many items as its turns, each cut to the engine's limits, and on engines whose
// reads take round trips, the tenants' reads made ahead, together (docs/queues.md, "Fair
// queues": combined pops, fewer round trips and writes).
#include <algorithm>
#include <utility>

#include "layers/fair/fair_state.h"

namespace kvq::detail {

void FairState::hint_pop_reads(Transaction& tr, std::size_t n, std::int64_t now,
                               std::span<const contention::OwnedRead> also) const {
  if (!hint_reads_) return;
  std::vector<contention::OwnedRead> reads;
  if (staged_) reads.push_back(staged_read(n));
  reads.push_back(index_.due_read(now));
  reads.push_back(index_.window_read(static_cast<int>(n) + 1));
  reads.insert(reads.end(), also.begin(), also.end());
  contention::prefetch(tr, reads);
}

std::vector<std::optional<FairItem>> FairState::pops_that_fit(Transaction& tr, std::size_t n,
                                                              std::int64_t now) {
  std::vector<std::optional<FairItem>> out;
  if (staged_) {
    for (FairItem& item : take_staged(tr, n)) out.emplace_back(std::move(item));
  }
  if (out.size() == n) return out;
  for (std::optional<FairItem>& item : turns_that_fit(tr, n - out.size(), db_->limits(), now)) {
    out.push_back(std::move(item));
  }
  return out;
}

std::vector<std::optional<FairItem>> FairState::turns_that_fit(Transaction& tr, std::size_t n,
                                                               const TransactionLimits& limits,
                                                               std::int64_t now) {
  std::vector<std::optional<FairItem>> out;
  const bool more_due = index_.file_due(tr, now);
  TurnCosts costs;
  int retired = 0;
  while (out.size() < n) {
    const std::size_t wanted = n - out.size();
    // Another window (tenants left the ring) reads up to wanted + 1 keys: an operation each on
    // etcd. Room for it and one tenant's turns, with a margin of one more, as below.
    if (!out.empty() &&
        tr.usage().operations + wanted + 1 + 2 * costs.ops + 8 > limits.max_operations) {
      return out;
    }
    // One entry more than could be served, as FairIndex::head reads two for a single pop.
    const std::vector<RingEntry> ring = index_.window(tr, static_cast<int>(wanted) + 1);
    // A turn's cost below is the tenant's own (its pops, its entry's move), not the window's.
    costs.before = tr.usage();
    if (ring.empty()) {
      // More wake-ups may be due than were filed: what was served so far, and the caller commits
      // and goes on. Else nothing is ready: every pop left gets nullopt.
      if (more_due) return out;
      out.resize(n);
      break;
    }
    // One entry: the window read the whole ring, so the tenant is alone in it and has every turn
    // left (and its entry stays in place).
    const bool alone = ring.size() == 1;
    ReadAhead ahead{std::vector<std::optional<TenantItems::Front>>(ring.size())};
    for (std::size_t i = 0; i < ring.size(); ++i) {
      const RingEntry& entry = ring[i];
      const std::size_t want =
          alone ? wanted : std::min(static_cast<std::size_t>(entry.credit), n - out.size());
      if (want == 0) break;
      if (hint_reads_ && i == ahead.end) {
        read_turns_ahead(tr, ring, i, alone, n - out.size(), costs.ops, limits, now, ahead);
      }
      std::vector<std::string> got =
          ahead.fronts[i] ? pop_front(tr, entry.tenant, std::move(*ahead.fronts[i]))
                          : pop_tenant(tr, entry.tenant, want, now, ShortBatch::kSaysNothing);
      if (got.empty()) {  // its items ran out (read with a conflict): it leaves the ring
        retire(tr, entry);
        // Commit that, and go on: after kRetirePerTransaction, or with no room for another turn
        // like the largest so far (with dead letters, a turn writes several keys).
        if (++retired == kRetirePerTransaction || !costs.room_after_turn(tr, limits)) return out;
        continue;
      }
      index_.advance(tr, entry, static_cast<std::int64_t>(got.size()), alone);
      const bool short_turns = got.size() < want;
      for (std::string& v : got) out.push_back(FairItem{entry.tenant, std::move(v)});
      if (short_turns) return out;  // a later read tells whether it is empty now
      if (!costs.room_after_turn(tr, limits)) return out;
    }
  }
  return out;
}

bool FairState::TurnCosts::room_after_turn(Transaction& tr, const TransactionLimits& limits) {
  const TransactionUsage now = tr.usage();
  ops = std::max(ops, now.operations - before.operations);
  bytes = std::max(bytes, now.bytes - before.bytes);
  before = now;
  // Room for one more tenant's turns and the marker, with a margin of one more.
  return now.operations + 2 * ops + 8 <= limits.max_operations &&
         now.bytes + 2 * bytes + 4096 <= limits.max_bytes;
}

void FairState::read_turns_ahead(Transaction& tr, const std::vector<RingEntry>& ring,
                                 std::size_t from, bool alone, std::size_t left,
                                 std::size_t turn_ops, const TransactionLimits& limits,
                                 std::int64_t now_us, ReadAhead& ahead) {
  std::size_t to = ring.size();
  if (turn_ops > 0) {  // as many as fit, and one more (the loop's bound is an estimate)
    const std::size_t used = tr.usage().operations;
    const std::size_t room = limits.max_operations > used ? limits.max_operations - used : 0;
    to = std::min(to, from + room / turn_ops + 1);
  }
  // Singles: the tenants with one turn (credit 1) that the pops left reach unless a tenant before
  // them retires; their fronts are read here (the others' reads only hinted, as a front read for
  // a tenant not served would cost a round trip if its window ran short).
  const auto single = [&](std::size_t i) {
    return !alone && ring[i].credit == 1 && i < from + left;
  };
  std::vector<std::string_view> tenants, singles;
  for (std::size_t i = from; i < to; ++i) {
    tenants.push_back(ring[i].tenant);
    if (single(i)) singles.push_back(ring[i].tenant);
  }
  tenant_items_.prefetch(tr, tenants);
  std::vector<TenantItems::Front> read = tenant_items_.fronts(tr, singles, now_us);
  for (std::size_t i = from, s = 0; i < to; ++i) {
    if (single(i)) ahead.fronts[i] = std::move(read[s++]);
  }
  ahead.end = to;
}

std::vector<std::string> FairState::pop_front(Transaction& tr, const std::string& tenant,
                                              TenantItems::Front front) {
  if (auto got = tenant_items_.pop_front(tr, tenant, std::move(front))) return std::move(*got);
  return pop_through_queue(tr, tenant, 1);  // its timers due first
}

}  // namespace kvq::detail
