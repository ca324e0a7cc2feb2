// Internal: the item keys of Queue and PriorityQueue, in one place (docs/queues.md, "Items"):
//   Queue          subspace + (index, random [, attempts])
//   PriorityQueue  subspace + (priority, count, random [, attempts])
// `random` is 20 bytes: the push time (unix microseconds, 8 bytes big-endian) then 12 random
// bytes, so the age of an item can be read off its key. `attempts` (deliveries so far) is present
// only on an item that came back from an expired or nacked lease: it sorts right after the key the
// item had, so the item keeps its place in line.
#ifndef KVQ_SRC_LAYERS_ITEM_KEYS_H_
#define KVQ_SRC_LAYERS_ITEM_KEYS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/database.h"
#include "kvq/subspace.h"
#include "layers/contention/control.h"

namespace kvq::detail {

// The item range and size counter of a Queue / PriorityQueue (`prioritized`) stored under
// `subspace`: the keys whose first tuple element is an integer (type codes 0x0c..0x1c; control keys
// start with a string), with fresh hints for reads at its ends (contention/end_windows.h), and
// `total_key` as its total_key ("" for none).
contention::ItemRange item_range_of(const Subspace& subspace, bool prioritized,
                                    const std::string& total_key = {});

// `subspace`, after checking that a structure adding up to `own_key_size` bytes to its prefix
// keeps every key within kMaxKeySize; else throws invalid_argument naming `structure`.
Subspace with_room_for_keys(Subspace subspace, std::size_t own_key_size,
                            std::string_view structure);

// A new `random` part: push time + random bytes (file comment). Call it outside retry loops.
std::string new_item_random();

// Throws value_too_large for an item value over kMaxValueSize (before anything is written).
void check_item_value(std::string_view value);
// The push time (unix microseconds) a `random` part holds; nullopt for random parts written by an
// older kvq (not 20 bytes, or a time before 2020 or in the future).
std::optional<std::int64_t> item_pushed_us(std::string_view random);

// The position the next pushed item takes, from snapshot reads only (pushes never conflict):
// * Queue: the last item's index + 1 (from 1), behind the items out on lease too
//   (ItemRange::held_prefix).
// * PriorityQueue: the push counter's value (ItemRange::count_key), which the push raises by its
//   number of items. A push that starts after another committed reads the raised counter, so it
//   goes behind that push's items in every priority, and a push reads one key whatever its
//   priorities. A range without a counter is new (from 0) or holds items of a kvq before the
//   counter, counted per priority from 0 (then from kFirstCountAfterUpgrade, behind them).
// Throws internal_error on position overflow.
inline constexpr std::int64_t kFirstCountAfterUpgrade = std::int64_t{1} << 40;
// The key a push of `priority` with `random` goes to (see above).
std::string fresh_item_key(Transaction& tr, const Subspace& subspace,
                           const contention::ItemRange& items, bool prioritized,
                           std::int64_t priority, std::string_view random);
// The keys of items of `priorities` (in order, one per item; ignored in a Queue) with `randoms`
// as their random parts, at consecutive positions (a Queue: behind its last item; a PriorityQueue:
// from its push counter, raised by the number of items), so in order within each priority. One
// snapshot read in all (one round trip on etcd). Throws internal_error on position overflow.
std::vector<std::string> fresh_item_keys(Transaction& tr, const Subspace& subspace,
                                         const contention::ItemRange& items, bool prioritized,
                                         std::span<const std::int64_t> priorities,
                                         std::span<const std::string> randoms);

// An item key, decoded.
struct ItemKey {
  std::string base;  // the packed (index, random) or (priority, count, random), without attempts
  std::int64_t priority = 0;  // PriorityQueue; 0 for a Queue
  std::string random;
  int attempts = 0;  // deliveries so far
  // The packed elements after the attempts: a dead letter's (priority, reason) in the dead-letter
  // queue (dead_letters.h); empty for other items.
  std::string tail;
};
// Decodes the item key `key` of `subspace`. Throws corruption for keys kvq did not write.
ItemKey parse_item_key(const Subspace& subspace, std::string_view key, bool prioritized);
// The key of an item with `base` (ItemKey::base) after `attempts` deliveries, followed by `tail`
// (ItemKey::tail: a dead letter taken from the dead-letter queue keeps its priority and reason).
std::string item_key_with_attempts(const Subspace& subspace, std::string_view base, int attempts,
                                   std::string_view tail = {});

// The current unix time in microseconds (this client's wall clock).
std::int64_t now_us();

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_ITEM_KEYS_H_
