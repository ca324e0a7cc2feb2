// Fulfiller's handling of abandoned deliveries: items delivered to a popper that went away go
// back to their keys (reclaim_abandoned, put_back), and what a popper leaving by an exception, or
// taking its delivery, does with them (restore, consumed).
#include "kvq/error.h"
#include "layers/contention/fulfiller.h"

namespace kvq::contention {

// Slots older than request_ttl belong to poppers that went away (a live popper consumes its slot
// at once and re-registers if its request expired). Delivered items go back to their keys (the
// first delivery always, the others while they fit: several made every batch too large for etcd);
// slots still waiting are left to the request expiry (serve_one), unless their request is gone.
void Fulfiller::reclaim_abandoned(Transaction& tr, std::int64_t now, Result* r) {
  const std::int64_t cut = now - options_.request_ttl.count();
  const OwnedRead read = abandoned_read(now, kReclaimPerBatch);
  for (const auto& kv : tr.get_range(read.begin, read.end, read.options)) {
    try {
      if (!reclaim_one(tr, kv.key, cut, r)) return;
    } catch (const Error& e) {
      // Bytes kvq does not write (e.g. an already consumed slot an older kvq left for lazy
      // clearing): an abandoned slot nobody can take; drop it rather than block every batch.
      if (e.code() != ErrorCode::kCorruption) throw;
      tr.clear(kv.key);
    }
  }
}

bool Fulfiller::reclaim_one(Transaction& tr, const std::string& slot, std::int64_t cut, Result* r) {
  const std::string id = keys_.slot_id(slot);
  Slot s = read_slot(tr, slot);
  if (s.waiting()) {
    if (request_created_ms(id) >= cut - options_.request_ttl.count()) return true;
    if (tr.get(keys_.req(s.stamp))) return true;  // its request expires in request order
  }
  if (s.kind == Slot::kDelivered) {
    if (r->reclaimed > 0 && !room_to_put_back(tr, s)) return false;
    put_back(tr, id, s);
    ++r->reclaimed;
  }
  tr.clear(slot);
  return true;
}

bool Fulfiller::room_to_put_back(Transaction& tr, const Slot& s) const {
  // Per item: its set, its held place's clear and (etcd) that place's pin; then the clears and
  // reads of the slot and res; and room for the batch's first request and its tail.
  const TransactionUsage used = tr.usage();
  std::size_t bytes = used.bytes + kFirstRequestBytes + kTailBytes;
  for (const KeyValue& item : s.items) bytes += 2 * item.key.size() + item.value.size();
  const std::size_t ops = kItemOps * s.items.size() + 4 + kFirstRequestOps + kTailOps;
  return bytes <= limits_.max_bytes &&
         (limits_.max_operations == kUnbounded || used.operations + ops <= limits_.max_operations);
}

void Fulfiller::put_back(Transaction& tr, const std::string& id, const Slot& s) {
  for (const KeyValue& item : s.items) {
    if (item.key < items_.begin || item.key >= items_.end) {
      throw Error(ErrorCode::kCorruption, "queue: a delivered slot names a key outside the items");
    }
  }
  for (const KeyValue& item : s.items) {
    std::optional<std::string> value = s.value_in_res ? tr.get(keys_.res(id)) : item.value;
    if (!value) throw Error(ErrorCode::kCorruption, "queue: delivered item's value is missing");
    restore(tr, KeyValue{item.key, *value});
    set_held(tr, items_, item.key, /*hold=*/false);
  }
  tr.clear(keys_.res(id));
  tr.clear(keys_.slot(id));
}

void Fulfiller::restore(Transaction& tr, const KeyValue& item) {
  tr.set(item.key, item.value);
  add_size(tr, items_, 1);
}

void Fulfiller::consumed(Transaction& tr, const std::vector<KeyValue>& items) {
  for (const KeyValue& item : items) set_held(tr, items_, item.key, /*hold=*/false);
}

OwnedRead Fulfiller::abandoned_read(std::int64_t now_ms, int limit) const {
  const std::int64_t cut = now_ms - options_.request_ttl.count();
  return {keys_.slot_begin(), keys_.slot_before(cut), {.limit = limit, .snapshot = true}};
}

bool Fulfiller::has_abandoned(Transaction& tr, std::int64_t now_ms) {
  const OwnedRead read = abandoned_read(now_ms, 1);
  return !tr.get_range(read.begin, read.end, read.options).empty();
}

}  // namespace kvq::contention
