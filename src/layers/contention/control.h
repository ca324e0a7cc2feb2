// Internal: the control keys of high-contention pops and the codec of a popper's slot, under
// subspace + ("kvq", ...) of a Queue or PriorityQueue (docs/queues.md has the table):
//   ("kvq", "req", versionstamp)  = (request id, side, count)  a waiting pop (or group of pops)
//   ("kvq", "slot", request id)   = the popper's mailbox (Slot below)
//   ("kvq", "res", request id)    = a delivered item's value too big to inline in the slot
//   ("kvq", "lease")              = (holder request id, expiry unix ms): the one fulfiller
//   ("kvq", "waiting")            = 8-byte little-endian count of waiting requests
// A request id is 8 bytes of creation time (unix ms, big-endian) + 12 random bytes, so slots sort
// by age and a fulfiller can find the abandoned ones.
#ifndef KVQ_SRC_LAYERS_CONTENTION_CONTROL_H_
#define KVQ_SRC_LAYERS_CONTENTION_CONTROL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/database.h"
#include "kvq/queue.h"
#include "kvq/subspace.h"

namespace kvq::contention {

// Which end of the items a pop takes: front (Queue pop, pop_min) or back (pop_max).
enum class Side : std::int64_t { kFront = 0, kBack = 1 };

struct EndHints;  // end_windows.h: where reads at the ends of the items last found them

// Where the items of the structure live, and its size counter (owned by the layer above).
struct ItemRange {
  std::string begin, end;  // every item key k has begin <= k < end
  std::string size_key;    // 8-byte little-endian item count (atomic_add)
  // Item keys are the subspace key (prefix_size bytes), then (position, ...) or, prioritized,
  // (priority, position, ...).
  std::size_t prefix_size = 0;
  bool prioritized = false;
  // Shared by the copies of this range (end_windows.h); null: reads cover the whole range.
  std::shared_ptr<EndHints> hints;
  // A second counter every change of size_key also goes to, in the same transaction (a
  // FairQueue's ready items over all its tenants); empty: none.
  std::string total_key;
  // Work queues: the places of the items out on lease, one key each: held_prefix + the item's
  // key after the subspace's prefix (its (position, ...) or (priority, position, ...)). A Queue's
  // push goes behind them too (end_windows.h last_position), so that a lease's item coming back
  // to its own place is not behind items pushed after it. Empty: none kept.
  std::string held_prefix;
  // PriorityQueue: the push counter, 8-byte little-endian: the positions handed out so far
  // (item_keys.h fresh_item_keys). Empty for a Queue.
  std::string count_key;
};

// The most requests HighContentionOptions::batch_size may ask a batch to serve.
inline constexpr int kMaxBatchSize = 100'000;
// Throws invalid_option_value unless 1 <= batch_size <= kMaxBatchSize, and lease and request_ttl
// are > 0 and at most kMaxWorkDuration.
void check_options(const HighContentionOptions& options);

// The keys of the held places of `items` (ItemRange::held_prefix): an empty range if none kept.
KeyRange held_range(const ItemRange& items);
// Keeps (`hold`) or frees the held place of the item at `item_key` of `items` while the item is
// out of the range (on lease, or delivered to a high-contention pop's slot), so that pushes go
// behind it; nothing if `items` keeps no held places.
void set_held(Transaction& tr, const ItemRange& items, std::string_view item_key, bool hold);

// Adds `delta` to the item count of `items`: its size_key, and its total_key if it has one.
void add_size(Transaction& tr, const ItemRange& items, std::int64_t delta);

// The current unix time in milliseconds (wall clock: ids, lease expiry, request age).
std::int64_t now_ms();

class ControlKeys {
 public:
  // Keys under `control` (subspace + ("kvq",)).
  explicit ControlKeys(const Subspace& control);

  std::string slot(std::string_view id) const;
  std::string res(std::string_view id) const;
  // The request id of a slot key.
  std::string slot_id(std::string_view slot_key) const;
  // The request key with the 10-byte versionstamp `stamp`.
  std::string req(std::string_view stamp) const;
  // The request key as a set_versionstamped_key parameter (placeholder + offset).
  std::string req_placeholder() const;
  // Slot keys of requests created before `unix_ms` are exactly [slot_begin(), slot_before(ms)).
  std::string slot_before(std::int64_t unix_ms) const;
  const std::string& slot_begin() const { return slot_begin_; }
  const std::string& req_begin() const { return req_begin_; }
  const std::string& req_end() const { return req_end_; }
  const std::string& lease() const { return lease_; }
  const std::string& waiting() const { return waiting_; }

 private:
  Subspace control_;
  std::string slot_begin_, req_begin_, req_end_, lease_, waiting_;
};

// The value of a request key: (request id, side, count). A request asks for `count` (>= 1) items
// from `side`: one pop, or a combined group of pops staged as one request. A value without the
// count (written before group requests existed) asks for one; a count over kMaxRequestCount is
// read as kMaxRequestCount (a combined group is at most 256 pops).
constexpr std::int64_t kMaxRequestCount = 65'536;
struct RequestValue {
  std::string id;
  Side side = Side::kFront;
  std::int64_t count = 1;
};
std::string encode_request(const RequestValue& r);
// Throws corruption (from the tuple layer) for bytes kvq did not write.
RequestValue decode_request(std::string_view value);

// A new request id: creation time + random bytes (see the file comment).
std::string new_request_id();
// The creation time (unix ms) of a request id.
std::int64_t request_created_ms(std::string_view id);

// A popper's slot, decoded. Stored as one state byte and a payload:
//   \x00 + stamp  waiting                 \x03 + stamp  waiting, handed the fulfiller lease
//   \x01 + le32(len) + item key + value   one item delivered inline
//   \x04 + item key                       one item delivered, the value in res
//   \x05 + (le32(key len) + key + le32(value len) + value) per item
//                                         several items delivered inline (a request for several)
//   \x02                                  answered "empty"
// A delivered slot keeps the items' keys so that items delivered to a popper that went away go
// back to exactly where they were.
struct Slot {
  enum Kind { kAbsent, kWaiting, kBaton, kDelivered, kEmpty } kind = kAbsent;
  std::string stamp;            // kWaiting, kBaton: the request's versionstamp
  std::vector<KeyValue> items;  // kDelivered: the items, in the order the popper gets them
  bool value_in_res = false;    // kDelivered: one item, its value (empty here) is in res
  bool waiting() const { return kind == kWaiting || kind == kBaton; }
};

// Reads and decodes the slot at `key` (a read conflict unless snapshot). Throws corruption for
// bytes kvq did not write.
Slot read_slot(Transaction& tr, const std::string& key, bool snapshot = false);
// The set_versionstamped_value parameter of a new waiting slot.
std::string waiting_slot_placeholder();
// The slot of a request handed the lease (its stamp kept).
std::string baton_slot(std::string_view stamp);
// The delivered slot for `items` (at least one, in order) if they fit inline in one value;
// nullopt if not (one item too big to inline goes to res: delivered_in_res).
std::optional<std::string> delivered_inline(std::span<const KeyValue* const> items);
// The bytes one item adds to a slot delivering several (delivered_inline's size).
std::size_t delivered_entry_size(const KeyValue& item);
// The delivered slot of one item whose value is in res.
std::string delivered_in_res(std::string_view item_key);
std::string empty_slot();

// The lease value: (holder, expiry unix ms).
std::string lease_value(std::string_view holder, std::int64_t expiry_ms);
struct Lease {
  std::string holder;
  std::int64_t expiry_ms = 0;
};
std::optional<Lease> read_lease(Transaction& tr, const ControlKeys& keys, bool snapshot);
// The ids of the `n` oldest waiting requests, oldest first (a read conflict on what was read
// unless snapshot).
std::vector<std::string> first_request_ids(Transaction& tr, const ControlKeys& keys, int n,
                                           bool snapshot);

}  // namespace kvq::contention

#endif  // KVQ_SRC_LAYERS_CONTENTION_CONTROL_H_
