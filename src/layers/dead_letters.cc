#include "layers/dead_letters.h"

#include "common/bytes.h"
#include "kvq/error.h"
#include "kvq/tuple.h"
#include "layers/contention/end_windows.h"
#include "layers/item_keys.h"
#include "tuple/tuple_codec.h"

namespace kvq::detail {

DeadLetters::DeadLetters(Subspace dead)
    : dead_(std::move(dead)), items_(item_range_of(dead_, /*prioritized=*/false)) {}

void DeadLetters::check_reason(std::string_view reason) {
  const std::size_t bad = tuple_codec::FirstInvalidUtf8(reason);
  if (bad != reason.size()) {
    throw Error(ErrorCode::kInvalidArgument, "queue: a nack's reason must be UTF-8 text (byte " +
                                                 std::to_string(bad) +
                                                 " is not); nothing was changed");
  }
}

std::string_view DeadLetters::cut_reason(std::string_view reason) {
  if (reason.size() <= kMaxReasonSize) return reason;
  std::size_t end = kMaxReasonSize;
  // Back to the start of the character the cut falls in (UTF-8 continuation bytes are 10xxxxxx).
  while (end > 0 && (static_cast<unsigned char>(reason[end]) & 0xC0) == 0x80) --end;
  return reason.substr(0, end);
}

void DeadLetters::add(Transaction& tr, std::string_view value, int attempts, std::int64_t priority,
                      std::string_view reason) {
  std::string key = fresh_item_key(tr, dead_, items_, false, 0, new_item_random());
  key += Tuple().append(attempts).append(priority).append(std::string(cut_reason(reason))).pack();
  tr.set(key, value);
  tr.atomic_add(items_.size_key, std::int64_t{1});
}

std::vector<KeyValue> DeadLetters::front(Transaction& tr, int n, bool snapshot) {
  if (n < 0) throw Error(ErrorCode::kInvalidOptionValue, "dead letters: limit must be >= 0");
  if (n == 0) return {};
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

std::vector<DeadLetter> DeadLetters::take_front(Transaction& tr, int n, std::size_t max_bytes) {
  std::vector<DeadLetter> out;
  std::size_t bytes = 0;
  for (const KeyValue& kv : front(tr, n, false)) {
    bytes += 2 * (kv.key.size() + kv.value.size());
    if (!out.empty() && bytes > max_bytes) break;  // (the read's conflict covers more: harmless)
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
