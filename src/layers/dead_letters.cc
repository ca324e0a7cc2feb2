#include "layers/dead_letters.h"

#include "common/bytes.h"
#include "kvq/error.h"
#include "kvq/tuple.h"
#include "layers/contention/end_windows.h"
#include "layers/item_keys.h"

namespace kvq::detail {

DeadLetters::DeadLetters(Subspace dead)
    : dead_(std::move(dead)), items_(item_range_of(dead_, /*prioritized=*/false)) {}

void DeadLetters::add(Transaction& tr, std::string_view value, int attempts, std::int64_t priority,
                      std::string_view reason) {
  std::string key = fresh_item_key(tr, dead_, items_, false, 0, new_item_random());
  key += Tuple()
             .append(attempts)
             .append(priority)
             .append(std::string(reason.substr(0, kMaxReasonSize)))
             .pack();
  tr.set(key, value);
  tr.atomic_add(items_.size_key, std::int64_t{1});
}

std::vector<KeyValue> DeadLetters::front(Transaction& tr, int n, bool snapshot) {
  if (n <= 0) return {};
  return contention::read_end(tr, items_, contention::Side::kFront, n, snapshot);
}

DeadLetter DeadLetters::decode(const KeyValue& kv) const {
  DeadLetter d;
  d.value = kv.value;
  try {
    const Tuple t = dead_.unpack(kv.key);
    if (t.size() >= 5) {
      d.attempts = static_cast<int>(t.get_int(2));
      d.priority = t.get_int(3);
      d.reason = t.get_string(4);
    }
  } catch (const Error&) {
    // An item pushed into the dead-letter queue by hand: no history, priority 0.
  }
  return d;
}

std::vector<DeadLetter> DeadLetters::take_front(Transaction& tr, int n) {
  std::vector<DeadLetter> out;
  for (const KeyValue& kv : front(tr, n, false)) {
    out.push_back(decode(kv));
    tr.clear(kv.key);
  }
  if (!out.empty()) tr.atomic_add(items_.size_key, -static_cast<std::int64_t>(out.size()));
  return out;
}

std::vector<DeadLetter> DeadLetters::peek(Transaction& tr, int n) {
  std::vector<DeadLetter> out;
  for (const KeyValue& kv : front(tr, n, true)) out.push_back(decode(kv));
  return out;
}

std::int64_t DeadLetters::size(Transaction& tr) {
  auto v = tr.get(items_.size_key, /*snapshot=*/true);
  return v ? common::decode_le64(*v) : 0;
}

}  // namespace kvq::detail
