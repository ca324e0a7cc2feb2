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

// How many more items like the one taken since `before` fit in `limits`.
std::size_t room_for_more(Transaction& tr, const TransactionLimits& limits,
                          const TransactionUsage& before) {
  const TransactionUsage after = tr.usage();
  const std::size_t ops = after.operations - before.operations;
  const std::size_t bytes = after.bytes - before.bytes + kSlackBytesPerItem;
  std::size_t more = room(limits.max_bytes, after.bytes, kReserveBytes) / bytes;
  if (ops > 0) {
    more = std::min(more, room(limits.max_operations, after.operations, kReserveOperations) / ops);
  }
  return more;
}

}  // namespace

std::size_t consume_fitting(Transaction& tr, const contention::ItemRange& items,
                            const TransactionLimits& limits, contention::Side side, std::size_t n,
                            ShortBatch short_batch, const std::function<void(KeyValue&)>& consume) {
  // (usage() costs a pass over the transaction: not measured for a batch of one.)
  const TransactionUsage before = n > 1 ? tr.usage() : TransactionUsage{};
  std::vector<KeyValue> first = end_items(tr, items, side, 1);
  if (first.empty()) return 0;
  const std::string first_key = first[0].key;
  consume(first[0]);
  const std::size_t more = n > 1 ? std::min(n - 1, room_for_more(tr, limits, before)) : 0;
  // (A limit of 0 would mean "no limit".) The first read's conflict covers up to its item; the
  // rest's, the range beyond it.
  std::vector<KeyValue> rest;
  if (more > 0) {
    const contention::ItemRange others = beyond(items, side, first_key);
    rest = short_batch == ShortBatch::kMeansNoMore
               ? end_items(tr, others, side, more)
               : contention::read_end_up_to_last(tr, others, side, contention::range_limit(more));
  }
  for (KeyValue& kv : rest) consume(kv);
  const std::size_t count = 1 + rest.size();
  contention::add_size(tr, items, -static_cast<std::int64_t>(count));
  return count;
}

}  // namespace kvq::detail
