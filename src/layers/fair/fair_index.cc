#include "layers/fair/fair_index.h"

#include <algorithm>
#include <string>

#include "layers/item_keys.h"

namespace kvq::detail {

void FairIndex::wake(Transaction& tr, std::string_view tenant, std::int64_t due_us,
                     std::string_view id) const {
  tr.set(keys_.wake(due_us, tenant, id), "");
}

void FairIndex::cancel_wake(Transaction& tr, std::string_view tenant, std::int64_t due_us,
                            std::string_view id) const {
  tr.clear(keys_.wake(due_us, tenant, id));
}

void FairIndex::file_due(Transaction& tr) const {
  const KeyRange due = keys_.wakes_due(now_us());
  RangeOptions first;
  first.limit = kFilePerOp;
  first.snapshot = true;
  for (const KeyValue& kv : tr.get_range(due.begin, due.end, first)) {
    tr.clear(kv.key);
    const std::string tenant = keys_.wake_tenant(kv.key);
    if (!tr.get(keys_.filed(tenant)).has_value()) file(tr, tenant, 0);
  }
}

std::optional<RingEntry> FairIndex::head(Transaction& tr) const {
  const KeyRange ring = keys_.ring_range();
  RangeOptions first;
  first.limit = 1;
  auto kv = tr.get_range(ring.begin, ring.end, first);
  if (kv.empty()) return std::nullopt;
  return keys_.ring_entry(std::move(kv[0].key), kv[0].value);
}

void FairIndex::retire(Transaction& tr, const RingEntry& entry) const {
  tr.clear(entry.key);
  tr.clear(keys_.filed(entry.tenant));
}

void FairIndex::advance(Transaction& tr, const RingEntry& entry) const {
  if (entry.credit > 1) {
    tr.set(entry.key, pack_int(entry.credit - 1));
    return;
  }
  tr.clear(entry.key);
  file(tr, entry.tenant, entry.turn);
}

std::int64_t FairIndex::weight(Transaction& tr, std::string_view tenant, bool snapshot) const {
  const auto w = tr.get(keys_.weight(tenant), snapshot);
  return w ? unpack_int(*w) : 1;
}

void FairIndex::file(Transaction& tr, std::string_view tenant, std::int64_t after) const {
  const KeyRange ring = keys_.ring_range();
  RangeOptions last;
  last.limit = 1;
  last.reverse = true;
  last.snapshot = true;
  const auto back = tr.get_range(ring.begin, ring.end, last);
  const std::int64_t back_turn =
      back.empty() ? 0 : keys_.ring_entry(back[0].key, back[0].value).turn;
  const std::int64_t turn = std::max(back_turn, after) + 1;
  tr.set(keys_.ring(turn, tenant), pack_int(weight(tr, tenant)));
  tr.set(keys_.filed(tenant), pack_int(turn));
}

}  // namespace kvq::detail
