// ItemStore's batch operations (item_store.h, "batches", "takes"): many pushes, pops or takes in
// one transaction, in order. A push batch allocates its positions with one snapshot read (the
// Queue's last index, the PriorityQueue's push counter) and then counts up, so its items keep the
// batch's order; a pop batch
// reads the first (or last) n items with one range read and clears them; a take batch reads them
// the same way and puts each under a lease (WorkItems::lease). A single take is a take batch of
// one. docs/queues.md, "Batches".
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "common/clock.h"
#include "kvq/error.h"
#include "layers/fitting.h"
#include "layers/item_keys.h"
#include "layers/item_store.h"

namespace kvq::detail {
namespace {

// One random part per item, as a single push's: its push time, then random bytes (item keys end
// with one; stats() reads the front item's age from it).
std::vector<std::string> random_parts(std::size_t n) {
  std::vector<std::string> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.push_back(new_item_random());
  return out;
}

}  // namespace

// ---- push batches --------------------------------------------------------------------------

void ItemStore::check_fits(Transaction& tr, std::size_t count) {
  const TransactionLimits limits = db_->limits();
  const TransactionUsage u = tr.usage();
  if (u.bytes + kReserveBytes <= limits.max_bytes &&
      u.operations + kReserveOperations <= limits.max_operations) {
    return;
  }
  throw Error(ErrorCode::kTransactionTooLarge,
              "queue: push_batch of " + std::to_string(count) + " items needs " +
                  std::to_string(u.bytes) + " bytes and " + std::to_string(u.operations) +
                  " operations, more than one transaction of this engine takes (" +
                  std::to_string(limits.max_bytes) + " bytes, " +
                  std::to_string(limits.max_operations) +
                  " operations, less a small reserve): split the batch; nothing was written");
}

// Writes `items` at consecutive positions (item_keys.h fresh_item_keys: one snapshot read), with
// the given random parts, and adds them to the size counter.
void ItemStore::write_batch(Transaction& tr, std::span<const PushItem> items,
                            const std::vector<std::string>& randoms) {
  std::vector<std::int64_t> priorities;
  for (const PushItem& item : items) priorities.push_back(item.priority);
  const std::vector<std::string> keys =
      fresh_item_keys(tr, subspace_, items_, prioritized_, priorities, randoms);
  for (std::size_t i = 0; i < items.size(); ++i) tr.set(keys[i], items[i].value);
  contention::add_size(tr, items_, static_cast<std::int64_t>(items.size()));
  check_fits(tr, items.size());
}

void ItemStore::push_batch(Transaction& tr, std::span<const PushItem> items) {
  for (const PushItem& item : items) check_item_value(item.value);
  if (!items.empty()) write_batch(tr, items, random_parts(items.size()));
}

void ItemStore::push_batch(std::span<const PushItem> items) {
  for (const PushItem& item : items) check_item_value(item.value);
  if (items.empty()) return;
  // The random parts are chosen once, outside the retry loop (as for single pushes).
  const std::vector<std::string> randoms = random_parts(items.size());
  run_marked([&](Transaction& tr) {
    write_batch(tr, items, randoms);
    return 0;
  });
}

// ---- pop batches ---------------------------------------------------------------------------

std::size_t ItemStore::consume_fitting(Transaction& tr, Side side, std::size_t n,
                                       ShortBatch short_batch, ItemWrites writes,
                                       const std::function<void(KeyValue&)>& consume) {
  return detail::consume_fitting(tr, items_, db_->limits(), side, n, short_batch, writes, consume);
}

std::vector<std::string> ItemStore::pop_fitting(Transaction& tr, Side side, std::size_t n,
                                                ShortBatch short_batch) {
  std::vector<std::string> out;
  consume_fitting(tr, side, n, short_batch, ItemWrites::kKeyOnly, [&](KeyValue& kv) {
    tr.clear(kv.key);
    out.push_back(std::move(kv.value));
  });
  return out;
}

std::vector<std::string> ItemStore::pop_batch(Transaction& tr, Side side, std::size_t n) {
  return pop_batch(tr, side, n, ShortBatch::kMeansNoMore);
}

std::vector<std::string> ItemStore::pop_batch(Transaction& tr, Side side, std::size_t n,
                                              ShortBatch short_batch) {
  if (n == 0) return {};
  // No overtaking of waiting high-contention pops: none if some are left waiting.
  if (!release_due_and_serve_waiting(tr, side)) return {};
  return pop_fitting(tr, side, n, short_batch);
}

std::vector<std::string> ItemStore::pop_batch(Side side, std::size_t n, ShortBatch short_batch,
                                              std::chrono::milliseconds timeout) {
  if (n == 0) return {};
  // Waiting high-contention pops that do not all fit in one transaction are served over several,
  // this batch's items taken in the first that leaves none waiting; `timeout` bounds them all.
  const common::SteadyTime deadline = common::deadline_of_timeout(timeout);
  for (bool first = true;; first = false) {
    if (!first && common::time_left(deadline).count() == 0) {
      throw Error(ErrorCode::kTransactionTimedOut,
                  "pop_batch: the timeout passed while it served waiting pop requests");
    }
    TransactionOptions options;
    options.timeout = common::timeout_until(deadline);
    std::optional<std::vector<std::string>> got = run_marked(
        [&](Transaction& tr) -> std::optional<std::vector<std::string>> {
          if (!release_due_and_serve_waiting(tr, side)) return std::nullopt;
          return pop_fitting(tr, side, n, short_batch);
        },
        options);
    if (got) return std::move(*got);
  }
}

// As pop_fast (item_store.cc) for a batch: after commit_unknown_result the marker tells.
std::optional<std::vector<std::string>> ItemStore::pop_batch_fast(Side side, std::size_t n) {
  return try_marked_once(
      *db_, markers_, [&](Transaction& tr) -> std::optional<std::vector<std::string>> {
        const std::int64_t now = now_us();
        if (hint_reads_) hint_due_and_end(tr, side, now, staged_->fast_pop_reads(now / 1000));
        if (staged_->requests_waiting(tr)) return std::nullopt;
        work_.release_due(tr, now);
        std::vector<std::string> got = pop_fitting(tr, side, n, ShortBatch::kSaysNothing);
        if (got.empty() && staged_->has_abandoned(tr, now / 1000)) return std::nullopt;
        return got;
      });
}

// ---- take batches ---------------------------------------------------------------------------

std::vector<Lease> ItemStore::take_batch(Transaction& tr, Side side, std::size_t n,
                                         std::chrono::milliseconds vt) {
  const std::int64_t vt_us = WorkItems::lease_us(vt);
  std::vector<Lease> out;
  if (n == 0) return out;
  release_due_before_end(tr, side);
  // (A lease's timer holds the item's value.)
  consume_fitting(tr, side, n, ShortBatch::kMeansNoMore, ItemWrites::kValueToo,
                  [&](KeyValue& kv) { out.push_back(work_.lease(tr, kv, vt_us)); });
  work_.count_taken(tr, out.size());
  return out;
}

std::vector<Lease> ItemStore::take_batch(Side side, std::size_t n, std::chrono::milliseconds vt) {
  WorkItems::lease_us(vt);
  if (n == 0) return {};
  return run_marked([&](Transaction& tr) { return take_batch(tr, side, n, vt); });
}

ItemStore::GuardedTake ItemStore::take_unless(Transaction& tr, Side side,
                                              std::chrono::milliseconds vt,
                                              std::span<const contention::OwnedRead> also,
                                              const std::function<bool(Transaction&)>& refuse,
                                              std::int64_t now) {
  const std::int64_t vt_us = WorkItems::lease_us(vt);
  release_due_before_end(tr, side, also, now);
  std::optional<KeyValue> kv = end_item(tr, side, /*snapshot=*/false);
  if (!kv) return {GuardedTake::kEmpty, std::nullopt};
  if (refuse(tr)) return {GuardedTake::kRefused, std::nullopt};
  Lease lease = work_.lease(tr, *kv, vt_us);
  contention::add_size(tr, items_, -1);
  work_.count_taken(tr, 1);
  return {GuardedTake::kTaken, std::move(lease)};
}

std::optional<Lease> ItemStore::take(Transaction& tr, Side side, std::chrono::milliseconds vt) {
  return take_unless(
             tr, side, vt, {}, [](Transaction&) { return false; }, now_us())
      .lease;
}

std::optional<Lease> ItemStore::take(Side side, std::chrono::milliseconds vt) {
  std::vector<Lease> one = take_batch(side, 1, vt);
  if (one.empty()) return std::nullopt;
  return std::move(one.front());
}

}  // namespace kvq::detail
