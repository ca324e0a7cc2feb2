#include "layers/item_store.h"

#include <climits>

#include "common/bytes.h"
#include "common/clock.h"
#include "common/random.h"
#include "kvq/error.h"
#include "kvq/tuple.h"
#include "layers/combined_ops.h"
#include "layers/contention/end_windows.h"
#include "layers/contention/owned_read.h"
#include "layers/contention/run_once.h"
#include "layers/item_keys.h"

namespace kvq::detail {
namespace {

const QueueOptions& validated(const QueueOptions& o) {
  contention::check_options(o.contention);
  if (o.pop_timeout.count() < 0 || o.marker_ttl.count() < 1) {
    throw Error(ErrorCode::kInvalidOptionValue, "queue: marker_ttl must be > 0, pop_timeout >= 0");
  }
  return o;
}

std::shared_ptr<Database> non_null(std::shared_ptr<Database> db) {
  if (!db) throw Error(ErrorCode::kInvalidArgument, "queue: null database");
  return db;
}

// A pop's timeout, as every mode takes it: invalid_option_value if negative; 0 (none) for one
// longer than a transaction may have (TransactionOptions::timeout: INT_MAX ms, about 24.8 days).
std::chrono::milliseconds pop_timeout_of(std::chrono::milliseconds timeout) {
  if (timeout.count() < 0) {
    throw Error(ErrorCode::kInvalidOptionValue,
                "queue: pop timeout of " + std::to_string(timeout.count()) + " ms (must be >= 0)");
  }
  return timeout.count() > INT_MAX ? std::chrono::milliseconds(0) : timeout;
}

// pop() (the own-loop pop or pop batch named `what`), with transaction_timed_out turned into the
// timed_out a pop's timeout promises.
template <typename Pop>
auto timed_pop(std::string_view what, Pop&& pop) {
  try {
    return pop();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kTransactionTimedOut) throw;
    throw Error(ErrorCode::kTimedOut, "queue: " + std::string(what) + " timed out: " + e.what());
  }
}

}  // namespace

ItemStore::ItemStore(std::shared_ptr<Database> db, Subspace subspace, QueueOptions options,
                     bool prioritized, const std::string& total_key)
    : db_(non_null(std::move(db))),
      hint_reads_(db_->reads_take_round_trips()),
      subspace_(std::move(subspace)),
      control_(subspace_.subspace(Tuple().append("kvq"))),
      options_(validated(options)),
      prioritized_(prioritized),
      items_(item_range_of(subspace_, prioritized, total_key)),
      markers_(db_, control_, options_.marker_ttl),
      work_(db_, subspace_, options_, prioritized, items_) {
  if (options_.high_contention) {
    // Due timers are moved before a fulfilment batch reads the front, so that the waiting pops
    // get them first (a later pop's own move would hand them to it).
    staged_ = std::make_unique<contention::StagedPops>(
        db_, control_, items_, options_.contention, markers_, contention::Refill{},
        contention::DueTimers{
            [this](std::int64_t now) { return work_.due_read(now); },
            [this](Transaction& tr, std::int64_t now) { work_.release_due(tr, now); }});
  }
  if (options_.combine) combined_ = std::make_unique<CombinedOps>(*this);
}

ItemStore::~ItemStore() = default;

// ---- push ----------------------------------------------------------------------------------

std::string ItemStore::item_key(Transaction& tr, std::int64_t priority, const std::string& random) {
  return fresh_item_key(tr, subspace_, items_, prioritized_, priority, random);
}

void ItemStore::push(Transaction& tr, std::string_view value, std::int64_t priority) {
  check_item_value(value);
  tr.set(item_key(tr, priority, new_item_random()), value);
  contention::add_size(tr, items_, 1);
}

void ItemStore::push(std::string_view value, std::int64_t priority) {
  check_item_value(value);
  if (combined_) return combined_->push(value, priority);
  push_uncombined(value, priority);
}

void ItemStore::push_uncombined(std::string_view value, std::int64_t priority) {
  // The item's random part is chosen once, outside the retry loop, with the marker.
  const std::string random = new_item_random();
  check_item_value(value);
  run_marked([&](Transaction& tr) {
    tr.set(item_key(tr, priority, random), value);
    contention::add_size(tr, items_, 1);
    return 0;
  });
}

// ---- plain pops ----------------------------------------------------------------------------

std::optional<KeyValue> ItemStore::end_item(Transaction& tr, Side side, bool snapshot) {
  auto kvs = contention::read_end(tr, items_, side, 1, snapshot);
  if (kvs.empty()) return std::nullopt;
  return std::move(kvs[0]);
}

void ItemStore::release_due_before_end(Transaction& tr, Side side,
                                       std::span<const contention::OwnedRead> also) {
  release_due_before_end(tr, side, also, now_us());
}

void ItemStore::release_due_before_end(Transaction& tr, Side side,
                                       std::span<const contention::OwnedRead> also,
                                       std::int64_t now) {
  hint_due_and_end(tr, side, now, also);
  work_.release_due(tr, now);  // expired leases and due delayed items first (work_items.h)
}

std::vector<contention::OwnedRead> ItemStore::first_reads(Side side, std::int64_t now) const {
  return {work_.due_read(now), contention::first_end_read(items_, side, 1, /*snapshot=*/false)};
}

void ItemStore::hint_due_and_end(Transaction& tr, Side side, std::int64_t now,
                                 std::span<const contention::OwnedRead> also) {
  if (!hint_reads_) return;
  std::vector<contention::OwnedRead> reads = first_reads(side, now);
  reads.insert(reads.end(), also.begin(), also.end());
  contention::prefetch(tr, reads);
}

std::optional<std::string> ItemStore::pop_plain(Transaction& tr, Side side) {
  release_due_before_end(tr, side);
  return pop_end(tr, side);
}

std::optional<std::string> ItemStore::pop_end(Transaction& tr, Side side) {
  auto kv = end_item(tr, side, false);
  if (!kv) return std::nullopt;
  tr.clear(kv->key);
  contention::add_size(tr, items_, -1);
  return std::move(kv->value);
}

std::optional<std::string> ItemStore::peek(Transaction& tr, Side side) {
  release_due_before_end(tr, side);
  auto kv = end_item(tr, side, false);
  if (!kv) return std::nullopt;
  return std::move(kv->value);
}

std::int64_t ItemStore::size(Transaction& tr) {
  auto v = tr.get(items_.size_key);
  return v ? common::decode_le64(*v) : 0;
}

void ItemStore::clear(Transaction& tr) {
  if (!items_.total_key.empty()) tr.atomic_add(items_.total_key, -size(tr));
  tr.clear_range(items_.begin, items_.end);
  if (staged_) staged_->serve_all(tr);  // waiting pops get "empty"
  tr.set(items_.size_key, common::encode_le64(0));
  work_.clear(tr);
}

std::optional<std::string> ItemStore::pop(Transaction& tr, Side side) {
  if (!release_due_and_serve_waiting(tr, side)) return std::nullopt;
  return pop_end(tr, side);
}

bool ItemStore::release_due_and_serve_waiting(Transaction& tr, Side side) {
  release_due_before_end(tr, side);
  // The waiting pops get what came due, not this one.
  return !staged_ || staged_->serve_all(tr);
}

// A combined pop's group, or a plain pop's transaction, ends by the timeout; the high-contention
// pop throws timed_out itself.
std::optional<std::string> ItemStore::pop(Side side, std::chrono::milliseconds timeout) {
  timeout = pop_timeout_of(timeout);
  return timed_pop("pop", [&]() -> std::optional<std::string> {
    if (combined_) return combined_->pop(side, common::deadline_of_timeout(timeout));
    return pop_alone(side, timeout);
  });
}

std::vector<std::string> ItemStore::pop_batch_within(Side side, std::size_t n,
                                                     std::chrono::milliseconds timeout) {
  timeout = pop_timeout_of(timeout);
  return timed_pop("pop_batch",
                   [&] { return pop_batch(side, n, ShortBatch::kMeansNoMore, timeout); });
}

std::optional<std::string> ItemStore::pop_alone(Side side, std::chrono::milliseconds timeout) {
  if (staged_) return pop_staged(side, timeout);
  TransactionOptions options;
  options.timeout = timeout;
  return run_marked([&](Transaction& tr) { return pop_plain(tr, side); }, options);
}

// ---- high-contention pops -------------------------------------------------------------------

std::optional<std::string> ItemStore::pop_staged(Side side, std::chrono::milliseconds timeout) {
  const common::SteadyTime deadline = common::deadline_of_timeout(timeout);
  Fast fast = pop_fast(side);
  ContentionStats& stats = contention_stats();
  if (!fast.staged) {
    stats.fast_pops.fetch_add(1, std::memory_order_relaxed);
    return std::move(fast.value);
  }
  stats.staged_pops.fetch_add(1, std::memory_order_relaxed);
  return staged_->pop(side, deadline);
}

std::vector<std::string> ItemStore::pop_staged_batch(Side side, std::size_t n,
                                                     common::SteadyTime deadline) {
  contention_stats().staged_pops.fetch_add(n, std::memory_order_relaxed);
  return staged_->pop_many(side, static_cast<std::int64_t>(n), deadline);
}

// One attempt at the plain pop, unless pops are already waiting (then a new pop must queue up
// behind them) or the queue looks empty while abandoned deliveries wait to be put back. After a
// failed attempt (conflict) the pop queues up too; after commit_unknown_result the marker tells.
// (The batch form with one item: batch_ops.cc.)
ItemStore::Fast ItemStore::pop_fast(Side side) {
  std::optional<std::vector<std::string>> got = pop_batch_fast(side, 1);
  if (!got) return Fast{true, std::nullopt};
  if (got->empty()) return Fast{false, std::nullopt};
  return Fast{false, std::move(got->front())};
}

}  // namespace kvq::detail
