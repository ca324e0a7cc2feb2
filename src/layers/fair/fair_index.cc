#include "layers/fair/fair_index.h"

#include <algorithm>
#include <string>

#include "common/bytes.h"
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

namespace {

// The read of the first due wake-ups (file_due).
constexpr RangeOptions kDueRead{.limit = FairIndex::kFilePerOp, .snapshot = true};

}  // namespace

bool FairIndex::file_due(Transaction& tr, std::int64_t now_us) const {
  const contention::OwnedRead due = due_read(now_us);
  DueWakes due_now = due_wakes(tr, due, tr.get_range(due.begin, due.end, due.options), now_us);
  file_wakes(tr, due_now.wakes);
  return due_now.page_full;
}

FairIndex::DueWakes FairIndex::due_wakes(Transaction& tr, const contention::OwnedRead& read,
                                         std::vector<KeyValue> first, std::int64_t now_us) const {
  constexpr std::size_t kPage = kFilePerOp;
  if (first.size() < kPage && read.begin != keys_.wakes_begin()) {
    const int left = static_cast<int>(kPage - first.size());
    for (KeyValue& kv :
         tr.get_range(keys_.wakes_begin(), read.begin, {.limit = left, .snapshot = true})) {
      first.push_back(std::move(kv));
    }
  }
  const bool page_full = first.size() == kPage;
  std::string next_start = page_full ? common::key_after(first.back().key) : "";
  {
    std::lock_guard lock(due_start_mu_);
    due_start_ = std::move(next_start);
  }
  return {with_timed_wakes(tr, std::move(first), now_us), page_full};
}

std::vector<KeyValue> FairIndex::with_timed_wakes(Transaction& tr, std::vector<KeyValue> wakes,
                                                  std::int64_t now_us) const {
  const auto timed = [&](const KeyValue& kv) { return keys_.wake_due_us(kv.key) > 0; };
  if (wakes.size() < static_cast<std::size_t>(kFilePerOp) ||
      std::any_of(wakes.begin(), wakes.end(), timed)) {
    return wakes;
  }
  const KeyRange due = keys_.timed_wakes_due(now_us);
  for (KeyValue& kv :
       tr.get_range(due.begin, due.end, {.limit = kTimedFilePerOp, .snapshot = true})) {
    wakes.push_back(std::move(kv));
  }
  return wakes;
}

contention::OwnedRead FairIndex::due_read(std::int64_t now_us) const {
  KeyRange due = keys_.wakes_due(now_us);
  {
    std::lock_guard lock(due_start_mu_);
    if (due_start_ > due.begin && due_start_ < due.end) due.begin = due_start_;
  }
  return {std::move(due.begin), std::move(due.end), kDueRead};
}

contention::OwnedRead FairIndex::window_read(int n) const {
  KeyRange ring = keys_.ring_range();
  return {std::move(ring.begin), std::move(ring.end), {.limit = n}};
}

FairIndex::Filed FairIndex::file_due_and_head(Transaction& tr, std::int64_t now_us) const {
  const contention::OwnedRead due = due_read(now_us), ring = window_read(2);
  const RangeRead reads[] = {due.view(), ring.view()};
  std::vector<std::vector<KeyValue>> got = tr.get_ranges(reads);
  DueWakes due_now = due_wakes(tr, due, std::move(got[0]), now_us);
  // Tenants filed go to the back of the ring, after every entry read: they change the head only
  // of a ring that held fewer than two entries.
  if (file_wakes(tr, due_now.wakes) && got[1].size() < 2) return {head(tr), due_now.page_full};
  return {head_of(std::move(got[1])), due_now.page_full};
}

bool FairIndex::file_wakes(Transaction& tr, const std::vector<KeyValue>& wakes) const {
  if (wakes.empty()) return false;
  // The wake-ups' tenants, each once (one can have several wake-ups due).
  std::vector<std::string> tenants;
  for (const KeyValue& kv : wakes) {
    tr.clear(kv.key);
    std::string tenant = keys_.wake_tenant(kv.key);
    if (std::find(tenants.begin(), tenants.end(), tenant) == tenants.end()) {
      tenants.push_back(std::move(tenant));
    }
  }
  // Each one's `filed` and weight keys, read together.
  std::vector<contention::OwnedRead> owned;
  for (const std::string& tenant : tenants) {
    for (contention::OwnedRead& r : filing_reads(tenant)) owned.push_back(std::move(r));
  }
  std::vector<RangeRead> reads;
  for (const contention::OwnedRead& r : owned) reads.push_back(r.view());
  const std::vector<std::vector<KeyValue>> got = tr.get_ranges(reads);
  bool filed_any = false;
  for (std::size_t t = 0; t < tenants.size(); ++t) {
    if (!got[2 * t].empty()) continue;  // filed already
    const std::vector<KeyValue>& weight_key = got[2 * t + 1];
    file(tr, tenants[t], weight_key.empty() ? 1 : unpack_int(weight_key[0].value));
    filed_any = true;
  }
  return filed_any;
}

std::vector<contention::OwnedRead> FairIndex::filing_reads(std::string_view tenant) const {
  // Reads of single keys, as get() would make them: the `filed` key with a read conflict, the
  // weight key as a snapshot (file() adds the conflict if it uses it).
  std::string filed = keys_.filed(tenant), weight = keys_.weight(tenant);
  std::string filed_end = common::key_after(filed), weight_end = common::key_after(weight);
  return {{std::move(filed), std::move(filed_end), {.limit = 1}},
          {std::move(weight), std::move(weight_end), {.limit = 1, .snapshot = true}}};
}

std::vector<RingEntry> FairIndex::window(Transaction& tr, int n) const {
  std::vector<RingEntry> out;
  for (KeyValue& kv : first(tr, n)) out.push_back(keys_.ring_entry(std::move(kv.key), kv.value));
  return out;
}

std::optional<FairIndex::Head> FairIndex::head(Transaction& tr) const {
  return head_of(first(tr, 2));
}

std::optional<FairIndex::Head> FairIndex::head_of(std::vector<KeyValue> two) const {
  if (two.empty()) return std::nullopt;
  std::string next_key = two.size() > 1 ? std::move(two[1].key) : std::string();
  return Head{keys_.ring_entry(std::move(two[0].key), two[0].value), two.size() == 1,
              std::move(next_key)};
}

std::string FairIndex::next_tenant(const Head& head) const {
  if (head.next_key.empty()) return head.entry.tenant;
  return keys_.ring_tenant(head.next_key);
}

std::vector<KeyValue> FairIndex::first(Transaction& tr, int n) const {
  const contention::OwnedRead ring = window_read(n);
  return tr.get_range(ring.begin, ring.end, ring.options);
}

void FairIndex::retire(Transaction& tr, const RingEntry& entry) const {
  tr.clear(entry.key);
  tr.clear(keys_.filed(entry.tenant));
}

void FairIndex::advance(Transaction& tr, const RingEntry& entry, std::int64_t served,
                        bool alone) const {
  // An entry of the earlier layout carries no weight: read it.
  const std::int64_t w = entry.weight > 0 ? entry.weight : weight(tr, entry.tenant);
  if (entry.credit > served) {
    tr.set(entry.key, FairKeys::ring_value(entry.credit - served, w));
  } else if (alone) {  // its next rounds start in place
    const std::int64_t credit = w - (served - entry.credit) % w;
    // Unchanged (weight 1, or a round that ends where it began): nothing to write. A tenant filed
    // meanwhile conflicts with the read that found this one alone, not with this write.
    if (credit != entry.credit || w != entry.weight) {
      tr.set(entry.key, FairKeys::ring_value(credit, w));
    }
  } else {
    tr.clear(entry.key);
    place(tr, entry.tenant, w, w);
  }
}

std::int64_t FairIndex::weight(Transaction& tr, std::string_view tenant) const {
  const auto w = tr.get(keys_.weight(tenant), /*snapshot=*/true);
  return w ? unpack_int(*w) : 1;
}

void FairIndex::set_weight(Transaction& tr, std::string_view tenant, std::int64_t w) const {
  if (w == 1) {
    tr.clear(keys_.weight(tenant));
  } else {
    tr.set(keys_.weight(tenant), pack_int(w));
  }
  if (!tr.get(keys_.filed(tenant)).has_value()) return;  // filing reads the weight key
  const KeyRange ring = keys_.ring_range();
  RangeOptions all;
  all.snapshot = true;
  for (KeyValue& kv : tr.get_range(ring.begin, ring.end, all)) {
    const RingEntry entry = keys_.ring_entry(std::move(kv.key), kv.value);
    if (entry.tenant != tenant) continue;
    tr.add_read_conflict_key(entry.key);  // a turn moving it meanwhile makes one of us retry
    tr.set(entry.key, FairKeys::ring_value(std::min(entry.credit, w), w));
    return;
  }
}

void FairIndex::file(Transaction& tr, std::string_view tenant, std::int64_t w) const {
  tr.add_read_conflict_key(keys_.weight(tenant));
  place(tr, tenant, w, w);
  tr.set(keys_.filed(tenant), "");
}

void FairIndex::place(Transaction& tr, std::string_view tenant, std::int64_t credit,
                      std::int64_t weight) const {
  tr.set(keys_.ring(tr.get_read_version(), next_placement_seq(), tenant),
         FairKeys::ring_value(credit, weight));
}

}  // namespace kvq::detail
