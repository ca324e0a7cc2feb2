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
    if (tr.get(keys_.filed(tenant)).has_value()) continue;
    const std::optional<RingEntry> back = last(tr);
    file(tr, tenant, back ? back->turn : 0);
  }
}

std::vector<RingEntry> FairIndex::window(Transaction& tr, int n) const {
  const KeyRange ring = keys_.ring_range();
  RangeOptions first;
  first.limit = n;
  std::vector<RingEntry> out;
  for (KeyValue& kv : tr.get_range(ring.begin, ring.end, first)) {
    out.push_back(keys_.ring_entry(std::move(kv.key), kv.value));
  }
  return out;
}

void FairIndex::retire(Transaction& tr, const RingEntry& entry) const {
  tr.clear(entry.key);
  tr.clear(keys_.filed(entry.tenant));
}

void FairIndex::advance(Transaction& tr, const RingEntry& entry, std::int64_t served, bool alone,
                        Back* back) const {
  if (entry.credit > served) {
    tr.set(entry.key, pack_int(entry.credit - served));
    return;
  }
  Back read;
  if (!back) back = &read;
  if (!alone && !back->known) {
    const std::optional<RingEntry> last_entry = last(tr);
    *back = last_entry ? Back{true, last_entry->turn, last_entry->key} : Back{true, 0, {}};
  }
  if (alone || back->key == entry.key) {  // its next rounds start in place
    const std::int64_t w = weight(tr, entry.tenant);
    tr.set(entry.key, pack_int(w - (served - entry.credit) % w));
    return;
  }
  tr.clear(entry.key);
  const std::int64_t after = std::max(entry.turn, back->turn);
  back->key = place(tr, entry.tenant, after);
  back->turn = after + 1;
}

std::int64_t FairIndex::weight(Transaction& tr, std::string_view tenant, bool snapshot) const {
  const auto w = tr.get(keys_.weight(tenant), snapshot);
  return w ? unpack_int(*w) : 1;
}

std::optional<RingEntry> FairIndex::last(Transaction& tr) const {
  const KeyRange ring = keys_.ring_range();
  RangeOptions last;
  last.limit = 1;
  last.reverse = true;
  last.snapshot = true;
  auto kv = tr.get_range(ring.begin, ring.end, last);
  if (kv.empty()) return std::nullopt;
  return keys_.ring_entry(std::move(kv[0].key), kv[0].value);
}

void FairIndex::file(Transaction& tr, std::string_view tenant, std::int64_t after) const {
  place(tr, tenant, after);
  tr.set(keys_.filed(tenant), "");
}

std::string FairIndex::place(Transaction& tr, std::string_view tenant, std::int64_t after) const {
  std::string key = keys_.ring(after + 1, tenant);
  tr.set(key, pack_int(weight(tr, tenant)));
  return key;
}

}  // namespace kvq::detail
