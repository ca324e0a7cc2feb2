#include "layers/combined_ops.h"

#include <algorithm>
#include <vector>

#include "kvq/error.h"
#include "layers/combining/batches.h"
#include "layers/item_store.h"

namespace kvq::detail {
namespace {

// At most this many operations in one group.
constexpr std::size_t kMaxGroup = 256;
// What one pushed item adds to a transaction besides its value (key, conflict range), roughly.
constexpr std::size_t kPushOverhead = 128;

struct PushRequest : combining::Request {
  PushItem item;
};

struct PopRequest : combining::Request {
  std::optional<std::string> value;
};

// Groups that fit in one transaction of `db`: about two engine operations per item (etcd counts
// them), and half the byte limit for the pushed values; leaders yield as `options` ask
// (combine_favors_latency).
combining::GroupLimits group_limits(Database& db, const QueueOptions& options) {
  const TransactionLimits l = db.limits();
  const std::size_t by_ops = l.max_operations > 64 ? (l.max_operations - 32) / 2 : 1;
  return {.max_count = std::min(kMaxGroup, by_ops),
          .max_weight = l.max_bytes / 2,
          .yield_when_alone = options.combine_favors_latency};
}

}  // namespace

CombinedOps::CombinedOps(ItemStore& store)
    : store_(store),
      pushes_(group_limits(store.db(), store.options())),
      front_pops_(group_limits(store.db(), store.options())),
      back_pops_(group_limits(store.db(), store.options())) {}

void CombinedOps::push(std::string_view value, std::int64_t priority) {
  PushRequest r;
  r.item = {value, priority};
  r.weight = value.size() + kPushOverhead;
  pushes_.submit(r, [&](std::vector<combining::Request*>& group) { serve_pushes(group); });
}

std::optional<std::string> CombinedOps::pop(contention::Side side, common::SteadyTime deadline) {
  PopRequest r;
  r.deadline = deadline;
  combining::Combiner& c = side == contention::Side::kFront ? front_pops_ : back_pops_;
  c.submit(r, [&](std::vector<combining::Request*>& group) { serve_pops(group, side); });
  return std::move(r.value);
}

// One push batch for the whole group, in submission order. If the engine refuses it as too large
// (the group limits are estimates), the halves are pushed in order, down to single pushes made as
// a push alone makes them (no batch reserve), so no push fails that would have succeeded alone.
// A batch that fails otherwise answers only its own requests with its error: the halves before it
// committed, and their pushes succeeded.
void CombinedOps::serve_pushes(std::vector<combining::Request*>& group) { push_halving(group); }

void CombinedOps::push_halving(std::span<combining::Request* const> requests) {
  auto item_of = [](combining::Request* q) -> const PushItem& {
    return static_cast<PushRequest*>(q)->item;
  };
  try {
    if (requests.size() == 1) {
      store_.push_uncombined(item_of(requests[0]).value, item_of(requests[0]).priority);
      return;
    }
    std::vector<PushItem> items;
    items.reserve(requests.size());
    for (combining::Request* q : requests) items.push_back(item_of(q));
    store_.push_batch(items);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kTransactionTooLarge && requests.size() >= 2) {
      push_halving(requests.first(requests.size() / 2));
      push_halving(requests.subspan(requests.size() / 2));
      return;
    }
    for (combining::Request* q : requests) q->fail(std::current_exception());
  }
}

// Pop batches until every pop of the group has an item or the queue is empty: the items go to the
// pops in submission order, each batch bounded by the pops' deadlines (serve_in_batches). (A
// batch returns fewer items than asked when it found fewer or the engine's limits cut it; its
// read-conflict range ends at the last item it took (ShortBatch::kSaysNothing), so pushes
// committed meanwhile do not make it retry, and the pops left over go to the next batch. An
// empty batch means the queue is empty.)
void CombinedOps::serve_pops(std::vector<combining::Request*>& group, contention::Side side) {
  combining::serve_in_batches(
      group, [&](std::span<combining::Request* const> pending, common::SteadyTime deadline) {
        std::vector<std::string> values = next_batch(side, pending.size(), deadline);
        for (std::size_t i = 0; i < values.size(); ++i) {
          static_cast<PopRequest*>(pending[i])->value = std::move(values[i]);
        }
        return values.size();
      });
}

// The next pop batch of a group, ending by `deadline`. In high-contention mode one attempt; if it
// conflicts with other processes (or their pops are waiting), the rest of the group queues up
// behind them as one request.
std::vector<std::string> CombinedOps::next_batch(contention::Side side, std::size_t n,
                                                 common::SteadyTime deadline) {
  if (!store_.high_contention()) {
    return store_.pop_batch(side, n, ShortBatch::kSaysNothing, common::timeout_until(deadline));
  }
  if (auto got = store_.pop_batch_fast(side, n)) {
    contention_stats().fast_pops.fetch_add(got->size(), std::memory_order_relaxed);
    return std::move(*got);
  }
  return store_.pop_staged_batch(side, n, deadline);
}

std::size_t CombinedOps::groups() const {
  return pushes_.groups() + front_pops_.groups() + back_pops_.groups();
}

std::size_t CombinedOps::requests() const {
  return pushes_.requests() + front_pops_.requests() + back_pops_.requests();
}

}  // namespace kvq::detail
