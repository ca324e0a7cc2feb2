#include "layers/item_keys.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <variant>

#include "common/bytes.h"
#include "common/clock.h"
#include "common/random.h"
#include "kvq/error.h"
#include "kvq/tuple.h"
#include "layers/contention/end_windows.h"

namespace kvq::detail {
namespace {

constexpr std::size_t kRandomSize = 20;  // as the recipes' os.urandom(20)
constexpr std::size_t kTimeSize = 8;
constexpr std::int64_t kYear2020Us = 1'577'836'800'000'000;

Tuple unpack_item(const Subspace& subspace, std::string_view key, std::size_t min_size) {
  try {
    Tuple t = subspace.unpack(key);
    if (t.size() >= min_size) return t;
  } catch (const Error&) {
    // reported below
  }
  throw Error(ErrorCode::kCorruption, "queue: not an item key");
}

}  // namespace

contention::ItemRange item_range_of(const Subspace& subspace, bool prioritized,
                                    const std::string& total_key) {
  const Subspace control = subspace.subspace(Tuple().append("kvq"));
  return {subspace.key() + '\x0c',
          subspace.key() + '\x1d',
          control.pack(Tuple().append("size")),
          subspace.key().size(),
          prioritized,
          contention::make_end_hints(),
          total_key,
          control.pack(Tuple().append("held")),
          prioritized ? control.pack(Tuple().append("count")) : std::string()};
}

std::int64_t now_us() { return common::wall_now_us(); }

Subspace with_room_for_keys(Subspace subspace, std::size_t own_key_size,
                            std::string_view structure) {
  const std::size_t longest = kMaxKeySize - own_key_size;
  if (subspace.key().size() > longest) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(structure) + ": a subspace prefix of " +
                    std::to_string(subspace.key().size()) + " bytes leaves too little of the " +
                    std::to_string(kMaxKeySize) + "-byte key limit for its own keys (at most " +
                    std::to_string(longest) + " bytes)");
  }
  return subspace;
}

std::string new_item_random() {
  return common::encode_be64(static_cast<std::uint64_t>(now_us())) +
         common::random_bytes(kRandomSize - kTimeSize);
}

std::optional<std::int64_t> item_pushed_us(std::string_view random) {
  if (random.size() != kRandomSize) return std::nullopt;
  const auto us = static_cast<std::int64_t>(common::decode_be64(random));
  if (us < kYear2020Us || us > now_us() + 3'600'000'000) return std::nullopt;
  return us;
}

namespace {

// The item key at `position` (Queue: (position, random); PriorityQueue: (priority, position,
// random)).
std::string pack_item_key(const Subspace& subspace, bool prioritized, std::int64_t priority,
                          std::int64_t position, std::string_view random) {
  if (!prioritized) return subspace.pack(Tuple().append(position).append(Bytes(random)));
  return subspace.pack(Tuple().append(priority).append(position).append(Bytes(random)));
}

// The first of `n` positions that stay below INT64_MAX from `first`; throws internal_error else.
std::int64_t checked_first(std::int64_t first, std::size_t n) {
  if (first > INT64_MAX - static_cast<std::int64_t>(n)) {
    throw Error(ErrorCode::kInternalError, "queue: index overflow");
  }
  return first;
}

// A Queue's next index: the recipe's last_index + 1, behind the held places too.
std::int64_t next_queue_index(Transaction& tr, const contention::ItemRange& items, std::size_t n) {
  const std::optional<std::int64_t> last = contention::last_position(tr, items);
  return checked_first(last ? *last : 0, n + 1) + 1;
}

// Where a PriorityQueue's counts start when it has no push counter yet: 0 for a new one; behind
// every count a kvq before the counter gave (per priority, from 0) if it holds items or held
// places of one.
std::int64_t first_count_without_counter(Transaction& tr, const contention::ItemRange& items) {
  constexpr RangeOptions kAny{.limit = 1, .snapshot = true};
  const KeyRange held = contention::held_range(items);
  const RangeRead reads[] = {{items.begin, items.end, kAny}, {held.begin, held.end, kAny}};
  for (const auto& found : tr.get_ranges(reads)) {
    if (!found.empty()) return kFirstCountAfterUpgrade;
  }
  return 0;
}

// The first of `n` counts for the items of one PriorityQueue push: the push counter's value
// (a snapshot read), which the push raises by n (atomic_add, no conflict).
std::int64_t take_counts(Transaction& tr, const contention::ItemRange& items, std::size_t n) {
  const std::optional<std::string> counter = tr.get(items.count_key, /*snapshot=*/true);
  const std::int64_t first = checked_first(
      counter ? common::decode_le64(*counter) : first_count_without_counter(tr, items), n);
  // Without a counter the add also sets it to where this push's counts start.
  tr.atomic_add(items.count_key, (counter ? 0 : first) + static_cast<std::int64_t>(n));
  return first;
}

}  // namespace

std::string fresh_item_key(Transaction& tr, const Subspace& subspace,
                           const contention::ItemRange& items, bool prioritized,
                           std::int64_t priority, std::string_view random) {
  const std::string randoms[] = {std::string(random)};
  return fresh_item_keys(tr, subspace, items, prioritized, std::span(&priority, 1), randoms)[0];
}

std::vector<std::string> fresh_item_keys(Transaction& tr, const Subspace& subspace,
                                         const contention::ItemRange& items, bool prioritized,
                                         std::span<const std::int64_t> priorities,
                                         std::span<const std::string> randoms) {
  const std::size_t n = randoms.size();
  if (n == 0) return {};  // (an empty redrive batch: no read, no write)
  const std::int64_t first =
      prioritized ? take_counts(tr, items, n) : next_queue_index(tr, items, n);
  std::vector<std::string> keys;
  keys.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    // A Queue's items have one line whatever priority they were given.
    keys.push_back(pack_item_key(subspace, prioritized, prioritized ? priorities[i] : 0,
                                 first + static_cast<std::int64_t>(i), randoms[i]));
  }
  return keys;
}

ItemKey parse_item_key(const Subspace& subspace, std::string_view key, bool prioritized) {
  const std::size_t n = prioritized ? 3 : 2;
  const Tuple t = unpack_item(subspace, key, n);
  ItemKey out;
  try {
    Tuple base = Tuple().append(t.get_int(0));
    if (prioritized) {
      out.priority = t.get_int(0);
      base.append(t.get_int(1));
    }
    out.random = t.get_bytes(n - 1).data;
    base.append(Bytes(out.random));
    out.base = base.pack();
    if (t.size() > n && std::holds_alternative<std::int64_t>(t[n])) {
      out.attempts = static_cast<int>(t.get_int(n));
      // Tuple encodings concatenate: what follows base and the attempts is the tail, as stored.
      const std::size_t head =
          subspace.key().size() + out.base.size() + Tuple().append(out.attempts).pack().size();
      out.tail = std::string(key.substr(std::min(head, key.size())));
    }
  } catch (const Error&) {
    throw Error(ErrorCode::kCorruption, "queue: not an item key");
  }
  return out;
}

std::string item_key_with_attempts(const Subspace& subspace, std::string_view base, int attempts,
                                   std::string_view tail) {
  std::string key = subspace.key();
  key += base;
  if (attempts > 0 || !tail.empty()) key += Tuple().append(attempts).pack();
  key += tail;
  return key;
}

void check_item_value(std::string_view value) {
  if (value.size() > kMaxValueSize) {
    throw Error(ErrorCode::kValueTooLarge, "queue: value larger than 100,000 bytes");
  }
}

}  // namespace kvq::detail
