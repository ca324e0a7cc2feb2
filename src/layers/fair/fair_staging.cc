// FairQueue's high-contention pops (FairQueueOptions::high_contention; docs/queues.md, "Fair
// queues"). Pops that conflict queue up as requests of contention::StagedPops, whose fulfiller
// hands out the items of a staging range (FairKeys::staging). When that range runs short, the
// fulfiller's refill (stage_turns) takes the next tenants' turns, exactly as plain pops would, and
// moves their items into it in the same transaction; plain pops take staged items before any
// tenant's turn. So every pop, staged or not, gets the items in the order single pops would have
// served them, and an item delivered to a popper that went away goes back to the staging range,
// first in line.
#include <algorithm>
#include <utility>

#include "layers/contention/end_windows.h"
#include "layers/contention/marked_run.h"
#include "layers/contention/stats.h"
#include "layers/fair/fair_state.h"
#include "layers/item_keys.h"

namespace kvq::detail {

contention::ItemRange FairState::staging_range() const {
  const KeyRange staging = keys_.staging();
  contention::ItemRange range;
  range.begin = staging.begin;
  range.end = staging.end;
  range.size_key = keys_.staged_count();
  range.total_key = keys_.ready_total();  // staged items still count in size()
  // No end-window hints (range.hints null): reads cover the whole range, which holds only what
  // batches staged and had no room to hand out, and deliveries put back.
  return range;
}

contention::OwnedRead FairState::staged_read(std::size_t n) const {
  return {staging_.begin, staging_.end, {.limit = contention::range_limit(n)}};
}

std::vector<FairItem> FairState::take_staged(Transaction& tr, std::size_t n) {
  const contention::OwnedRead first = staged_read(n);
  std::vector<FairItem> out;
  for (KeyValue& kv : tr.get_range(first.begin, first.end, first.options)) {
    tr.clear(kv.key);
    out.push_back(FairItem{keys_.staged_tenant(kv.key), std::move(kv.value)});
  }
  if (!out.empty()) contention::add_size(tr, staging_, -static_cast<std::int64_t>(out.size()));
  return out;
}

contention::Refilled FairState::stage_turns(Transaction& tr, std::size_t n,
                                            const TransactionLimits& room) {
  contention::Refilled out;
  const std::int64_t version = tr.get_read_version();
  std::vector<std::optional<FairItem>> turns = turns_that_fit(tr, n, room, now_us());
  // A pass that found no turn only retired kRetirePerTransaction emptied tenants, or filed a full
  // read of wake-ups and found none ready: go on while `room` allows, or the requests would wait
  // behind them (and a composed pop, which serves them first, would take the next turn itself).
  // Bytes bound it too: on the embedded engines operations do not.
  const auto room_for_pass = [&] {
    const TransactionUsage used = tr.usage();
    return used.operations + retire_pass_ops(n) <= room.max_operations &&
           used.bytes + kRetirePassBytes <= room.max_bytes;
  };
  while (turns.empty() && room_for_pass()) {
    turns = turns_that_fit(tr, n, room, now_us());
  }
  for (std::optional<FairItem>& item : turns) {
    if (!item) {  // no tenant has a ready item left
      out.exhausted = true;
      break;
    }
    KeyValue kv{keys_.staged(version, next_placement_seq(), item->tenant), std::move(item->value)};
    tr.set(kv.key, kv.value);
    out.items.push_back(std::move(kv));
  }
  if (!out.items.empty()) {
    contention::add_size(tr, staging_, static_cast<std::int64_t>(out.items.size()));
  }
  return out;
}

std::vector<std::optional<FairItem>> FairState::contended_pops(std::size_t n,
                                                               Clock::time_point deadline) {
  ContentionStats& stats = contention_stats();
  for (;;) {
    std::optional<std::vector<std::optional<FairItem>>> got = pops_fast(n);
    if (!got) break;
    // None: the attempt only retired kRetirePerTransaction emptied tenants (committed); go on.
    if (got->empty()) continue;
    stats.fast_pops.fetch_add(got->size(), std::memory_order_relaxed);
    return std::move(*got);
  }
  stats.staged_pops.fetch_add(n, std::memory_order_relaxed);
  return pops_staged(n, deadline);
}

// As ItemStore::pop_batch_fast: one marked attempt, unless requests are waiting. A queue that
// looks empty while abandoned deliveries wait to be put back stages too, so that the fulfiller
// puts them back first.
std::optional<std::vector<std::optional<FairItem>>> FairState::pops_fast(std::size_t n) {
  using Out = std::optional<std::vector<std::optional<FairItem>>>;
  return try_marked_once(*db_, markers_, [&](Transaction& tr) -> Out {
    const std::int64_t now = now_us();
    if (hint_reads_) hint_pop_reads(tr, n, now, staged_->fast_pop_reads(now / 1000));
    if (staged_->requests_waiting(tr)) return std::nullopt;
    std::vector<std::optional<FairItem>> got = pops_that_fit(tr, n, now);
    const bool nothing_ready = !got.empty() && !got.front();
    if (nothing_ready && staged_->has_abandoned(tr, now / 1000)) return std::nullopt;
    return got;
  });
}

std::vector<std::optional<FairItem>> FairState::pops_staged(std::size_t n,
                                                            Clock::time_point deadline) {
  std::vector<KeyValue> items =
      staged_->pop_items(contention::Side::kFront, static_cast<std::int64_t>(n), deadline);
  if (items.empty()) return std::vector<std::optional<FairItem>>(n);  // nothing was ready
  std::vector<std::optional<FairItem>> out;
  for (KeyValue& kv : items) {
    out.emplace_back(FairItem{keys_.staged_tenant(kv.key), std::move(kv.value)});
  }
  return out;
}

}  // namespace kvq::detail
