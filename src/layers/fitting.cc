#include "layers/fitting.h"

#include <algorithm>
#include <vector>

#include "common/bytes.h"
#include "layers/contention/end_windows.h"

namespace kvq::detail {
namespace {

// Slack per item when extrapolating a pop batch's cost from its first item (keys differ a little).
constexpr std::size_t kSlackBytesPerItem = 64;

std::size_t room(std::size_t limit, std::size_t used, std::size_t reserve) {
  return limit > used + reserve ? limit - used - reserve : 0;
}

std::vector<KeyValue> end_items(Transaction& tr, const contention::ItemRange& items,
                                contention::Side side, std::size_t n) {
  return contention::read_end(tr, items, side, contention::range_limit(n), /*snapshot=*/false);
}

// `items` less the part up to and including `key`, seen from `side` (the item a batch took
// first): a read of the rest then asks the store only for items it can still take (a read of
// the whole range would get `key` back, hidden by the batch's own clear, and fetch once more).
contention::ItemRange beyond(const contention::ItemRange& items, contention::Side side,
                             const std::string& key) {
  contention::ItemRange rest = items;
  if (side == contention::Side::kFront) {
    rest.begin = common::key_after(key);
  } else {
    rest.end = key;
  }
  return rest;
}

// What a batch's first item added to its transaction, and the room left for more like it.
class RoomForMore {
 public:
  // The first item, of a key and a value of these sizes, was consumed since `before`.
  RoomForMore(Transaction& tr, const TransactionLimits& limits, const TransactionUsage& before,
              std::size_t first_key_size, std::size_t first_value_size, ItemWrites writes)
      : writes_(writes), first_size_(counted_size(first_key_size, first_value_size)) {
    const TransactionUsage after = tr.usage();
    item_bytes_ = after.bytes - before.bytes + kSlackBytesPerItem;
    bytes_left_ = room(limits.max_bytes, after.bytes, kReserveBytes);
    items_ = bytes_left_ / item_bytes_;
    if (limits.max_operations != TransactionLimits{}.max_operations) {
      items_ = std::min(items_, room(limits.max_operations, after.operations, kReserveOperations) /
                                    operations_per_item(before, after));
    }
  }
  // How many more items like the first fit.
  std::size_t items() const { return items_; }
  // Whether `kv` fits in what is left, and if so counts it. An item whose written bytes exceed the
  // first's (a longer key; with ItemWrites::kValueToo, a larger value) may add more than the first
  // did, by up to kLargerItemFactor times the excess: counted so, a batch whose small first item
  // is followed by large ones stops before it outgrows the limit.
  bool fits(const KeyValue& kv) {
    const std::size_t size = counted_size(kv.key.size(), kv.value.size());
    const std::size_t cost =
        item_bytes_ + (size > first_size_ ? kLargerItemFactor * (size - first_size_) : 0);
    if (cost > bytes_left_) return false;
    bytes_left_ -= cost;
    return true;
  }

 private:
  static constexpr std::size_t kLargerItemFactor = 4;
  // The engine operations each further item may add. An engine that counts max(compares, writes)
  // (etcd) shows the first item's cost low when the transaction's compares lead, or when its
  // read's conflict merged with an earlier one: each further item adds a compare (its record,
  // read with a conflict) and as many writes as the first made, so it may add up to the larger.
  // (etcd counts compares plus writes in a transaction with versionstamps: a composed one that
  // writes them can still outgrow the limit; docs/queues.md, "Pop batch".)
  static std::size_t operations_per_item(const TransactionUsage& before,
                                         const TransactionUsage& after) {
    return std::max(
        {after.operations - before.operations, after.mutations - before.mutations, std::size_t{1}});
  }
  // The bytes of an item its consumption writes or clears: its key, and its value if written.
  std::size_t counted_size(std::size_t key_size, std::size_t value_size) const {
    return key_size + (writes_ == ItemWrites::kValueToo ? value_size : 0);
  }
  const ItemWrites writes_;
  const std::size_t first_size_;
  std::size_t item_bytes_ = 0, bytes_left_ = 0, items_ = 0;
};

}  // namespace

std::size_t consume_fitting(Transaction& tr, const contention::ItemRange& items,
                            const TransactionLimits& limits, contention::Side side, std::size_t n,
                            ShortBatch short_batch, ItemWrites writes,
                            const std::function<void(KeyValue&)>& consume) {
  // (usage() costs a pass over the transaction: not measured for a batch of one.)
  const TransactionUsage before = n > 1 ? tr.usage() : TransactionUsage{};
  std::vector<KeyValue> first = end_items(tr, items, side, 1);
  if (first.empty()) return 0;
  const std::string first_key = first[0].key;  // (consume may move from it)
  const std::size_t first_value_size = first[0].value.size();
  consume(first[0]);
  if (n == 1) {
    contention::add_size(tr, items, -1);
    return 1;
  }
  RoomForMore room_left(tr, limits, before, first_key.size(), first_value_size, writes);
  const std::size_t more = std::min(n - 1, room_left.items());
  // (A limit of 0 would mean "no limit".) The first read's conflict covers up to its item; the
  // rest's, the range beyond it.
  std::vector<KeyValue> rest;
  if (more > 0) {
    const contention::ItemRange others = beyond(items, side, first_key);
    rest = short_batch == ShortBatch::kMeansNoMore
               ? end_items(tr, others, side, more)
               : contention::read_end_up_to_last(tr, others, side, contention::range_limit(more));
  }
  std::size_t count = 1;
  for (KeyValue& kv : rest) {
    if (!room_left.fits(kv)) break;  // the rest's read conflict covers more: harmless
    consume(kv);
    ++count;
  }
  contention::add_size(tr, items, -static_cast<std::int64_t>(count));
  return count;
}

}  // namespace kvq::detail
