// TransactionState: construction, reads, writes and the checks they share. Commit, watches and
// retries are in transaction_commit.cc.
#include "client/transaction_state.h"

#include <limits>
#include <utility>

#include "client/range_merge.h"
#include "common/bytes.h"
#include "common/clock.h"

namespace kvq::detail {
namespace {

using common::key_after;
using engine::MutationType;

void validate_options(const TransactionOptions& options) {
  // FoundationDB's range for both durations. Larger ones would also overflow the clock arithmetic
  // (milliseconds::max() as nanoseconds wraps negative: an immediate timeout).
  constexpr std::int64_t kMaxMs = std::numeric_limits<int>::max();
  if (options.timeout.count() < 0 || options.timeout.count() > kMaxMs) {
    throw Error(ErrorCode::kInvalidOptionValue, "timeout must be in [0, 2147483647] ms");
  }
  if (options.retry_limit < -1) {
    throw Error(ErrorCode::kInvalidOptionValue, "retry_limit must be >= -1");
  }
  if (options.max_retry_delay.count() < 0 || options.max_retry_delay.count() > kMaxMs) {
    throw Error(ErrorCode::kInvalidOptionValue, "max_retry_delay must be in [0, 2147483647] ms");
  }
}

void check_key(std::string_view key) {
  if (key.size() > kMaxKeySize) {
    throw Error(ErrorCode::kKeyTooLarge, "key of " + std::to_string(key.size()) +
                                             " bytes exceeds " + std::to_string(kMaxKeySize));
  }
}

void check_value(std::size_t size) {
  if (size > kMaxValueSize) {
    throw Error(ErrorCode::kValueTooLarge, "value of " + std::to_string(size) + " bytes exceeds " +
                                               std::to_string(kMaxValueSize));
  }
}

void check_range(std::string_view begin, std::string_view end) {
  if (begin > end) throw Error(ErrorCode::kInvertedRange, "range begin is after its end");
}

// Validates a versionstamp parameter (ending in a 4-byte LE offset); returns its size without the
// offset.
std::size_t check_stamp_param(std::string_view with_offset, const char* what) {
  if (with_offset.size() < 4) {
    throw Error(ErrorCode::kClientInvalidOperation,
                std::string("versionstamped ") + what + " lacks its 4-byte offset");
  }
  const std::size_t size = with_offset.size() - 4;
  const std::uint32_t offset = common::decode_le32(with_offset.substr(size));
  if (static_cast<std::uint64_t>(offset) + 10 > size) {
    throw Error(ErrorCode::kClientInvalidOperation,
                std::string("versionstamp offset ") + std::to_string(offset) + " outside the " +
                    what + " of " + std::to_string(size) + " bytes");
  }
  return size;
}

// The bytes a single-key write-conflict range costs.
std::size_t conflict_size(std::string_view key) { return 2 * key.size() + 1; }

}  // namespace

TransactionState::TransactionState(std::shared_ptr<engine::Engine> engine,
                                   std::shared_ptr<DatabaseCounters> counters,
                                   const TransactionOptions& options)
    : engine_(std::move(engine)), counters_(std::move(counters)) {
  validate_options(options);
  options_ = options;
  start_ = common::clock().steady_now();
}

TransactionState::~TransactionState() {
  if (watches_.empty()) return;  // (an Error costs an allocation: not on every transaction)
  fail_pending_watches(
      Error(ErrorCode::kTransactionCancelled, "the transaction was destroyed before it committed"));
}

void TransactionState::set_options(const TransactionOptions& options) {
  validate_options(options);
  options_ = options;
}

Watch TransactionState::watch(std::string_view key) {
  check_usable();
  check_key(key);
  auto state = std::make_shared<WatchState>();
  watches_.push_back({std::string(key), state});
  return Watch(state);
}

// ---- reads ----

std::optional<std::string> TransactionState::get(std::string_view key, bool snapshot) {
  check_usable();
  check_key(key);
  const LocalWrite* w = overlay_.find(key);
  if (w != nullptr && w->kind != WriteKind::kAdd) return WriteOverlay::value_of(*w, {}, key);
  if (w == nullptr && overlay_.in_cleared(key)) return std::nullopt;
  std::optional<std::string> stored = store_get(key);
  if (!snapshot) add_read_conflict(std::string(key), key_after(key), /*unwritten=*/false);
  return w != nullptr ? WriteOverlay::value_of(*w, stored, key) : stored;
}

std::vector<KeyValue> TransactionState::get_range(std::string_view begin, std::string_view end,
                                                  const RangeOptions& options) {
  check_usable();
  check_range(begin, end);
  if (options.limit < 0) throw Error(ErrorCode::kInvalidArgument, "range limit must be >= 0");
  std::vector<KeyValue> out;
  if (begin == end) return out;
  RangeMerge merge(
      overlay_,
      [this](std::string_view b, std::string_view e, int limit, bool reverse) {
        return store_range(b, e, limit, reverse);
      },
      static_cast<std::size_t>(options.limit), &out);
  options.reverse ? merge.reverse(begin, end) : merge.forward(begin, end);
  if (options.snapshot) return out;
  // A read that stopped at its limit depends only on the part it saw.
  std::string rbegin(begin), rend(end);
  if (merge.hit_limit()) {
    if (!options.reverse) rend = key_after(out.back().key);
    if (options.reverse) rbegin = out.back().key;
  }
  add_read_conflict(std::move(rbegin), std::move(rend), /*unwritten=*/true);
  return out;
}

void TransactionState::prefetch(std::span<const RangeRead> reads) {
  check_usable();
  // The first fetch of each read's merge (range_merge.h) asks the store for exactly its range and
  // limit; later fetches (after local clears hide pairs) go to the store one by one.
  std::vector<engine::RangeQuery> queries;
  for (const RangeRead& r : reads) {
    if (r.begin < r.end && r.options.limit >= 0) {
      queries.push_back({r.begin, r.end, r.options.limit, r.options.reverse});
    }
  }
  if (queries.size() > 1) session().prefetch(queries);  // one read alone gains nothing
}

std::vector<std::vector<KeyValue>> TransactionState::get_ranges(std::span<const RangeRead> reads) {
  prefetch(reads);
  std::vector<std::vector<KeyValue>> out;
  out.reserve(reads.size());
  for (const RangeRead& r : reads) out.push_back(get_range(r.begin, r.end, r.options));
  return out;
}

Version TransactionState::get_read_version() {
  check_usable();
  Version v = session().read_version();
  has_read_version_ = true;
  return v;
}

// ---- writes ----

void TransactionState::set(std::string_view key, std::string_view value) {
  check_usable();
  check_key(key);
  check_value(value.size());
  const std::size_t delta = key.size() + value.size() + conflict_size(key);
  reserve(delta);
  overlay_.set(key, value);
  record({MutationType::kSet, std::string(key), std::string(value)}, true, delta);
}

void TransactionState::clear(std::string_view key) {
  check_usable();
  check_key(key);
  const std::size_t delta = key.size() + conflict_size(key);
  reserve(delta);
  overlay_.clear(key);
  record({MutationType::kClear, std::string(key), {}}, true, delta);
}

void TransactionState::clear_range(std::string_view begin, std::string_view end) {
  check_usable();
  check_range(begin, end);
  if (begin == end) return;
  const std::size_t delta = 2 * (begin.size() + end.size());
  reserve(delta);
  overlay_.clear_range(begin, end);
  record({MutationType::kClearRange, std::string(begin), std::string(end)}, true, delta);
}

void TransactionState::atomic_add(std::string_view key, std::string_view operand) {
  check_usable();
  check_key(key);
  check_value(operand.size());
  const std::size_t delta = key.size() + operand.size() + conflict_size(key);
  reserve(delta);
  overlay_.add(key, operand);
  record({MutationType::kAddValue, std::string(key), std::string(operand)}, true, delta);
}

void TransactionState::set_versionstamped_key(std::string_view key_with_offset,
                                              std::string_view value) {
  check_usable();
  const std::size_t key_size = check_stamp_param(key_with_offset, "key");
  if (key_size > kMaxKeySize) check_key(key_with_offset.substr(0, key_size));
  check_value(value.size());
  const std::size_t delta = key_with_offset.size() + value.size() + 2 * key_size + 1;
  reserve(delta);
  // The write conflict is added by the pipeline once the key is known.
  record({MutationType::kSetVersionstampedKey, std::string(key_with_offset), std::string(value)},
         false, delta);
}

void TransactionState::set_versionstamped_value(std::string_view key,
                                                std::string_view value_with_offset) {
  check_usable();
  check_key(key);
  const std::size_t value_size = check_stamp_param(value_with_offset, "value");
  check_value(value_size);
  const std::size_t delta = key.size() + value_with_offset.size() + conflict_size(key);
  reserve(delta);
  overlay_.set_stamped_value(key, value_with_offset);
  record({MutationType::kSetVersionstampedValue, std::string(key), std::string(value_with_offset)},
         true, delta);
}

void TransactionState::add_read_conflict_range(std::string_view begin, std::string_view end) {
  add_checked_read_conflict(begin, end, /*unwritten=*/false);
}

void TransactionState::add_read_conflict_as_read(std::string_view begin, std::string_view end) {
  add_checked_read_conflict(begin, end, /*unwritten=*/true);
}

void TransactionState::add_read_conflict_on_absent_key(std::string_view key) {
  add_read_conflict_range(key, common::key_after(key));
  if (engine_->reads_take_round_trips()) session().note_absent(key);
}

void TransactionState::add_checked_read_conflict(std::string_view begin, std::string_view end,
                                                 bool unwritten) {
  check_usable();
  check_range(begin, end);
  if (begin == end) return;
  add_read_conflict(std::string(begin), std::string(end), unwritten);
}

void TransactionState::add_write_conflict_range(std::string_view begin, std::string_view end) {
  check_usable();
  check_range(begin, end);
  if (begin == end) return;
  const std::size_t delta = begin.size() + end.size();
  reserve(delta);
  size_ += conflicts_.add_write(std::string(begin), std::string(end));
}

// ---- shared checks and helpers ----

void TransactionState::record(engine::Mutation m, bool conflict, std::size_t delta) {
  if (conflict) {
    if (m.type == MutationType::kClearRange) {
      conflicts_.add_write(m.param1, m.param2);
    } else {
      conflicts_.add_write(m.param1, key_after(m.param1));
    }
  }
  mutations_.push_back(std::move(m));
  size_ += delta;
}

void TransactionState::check_usable() {
  if (state_ == State::kCommitted) {
    throw Error(ErrorCode::kClientInvalidOperation,
                "the transaction already committed; reset() it before reuse");
  }
  if (state_ == State::kFailed) {
    throw Error(ErrorCode::kClientInvalidOperation,
                "the transaction's commit failed; call on_error() or reset() first");
  }
  if (timed_out()) {
    throw Error(ErrorCode::kTransactionTimedOut,
                "the transaction passed its timeout of " +
                    std::to_string(options_.timeout.count()) + " ms" +
                    (last_retried_.empty() ? "" : " retrying after: " + last_retried_));
  }
}

bool TransactionState::timed_out() const {
  return options_.timeout.count() > 0 && common::clock().steady_now() - start_ >= options_.timeout;
}

void TransactionState::reserve(std::size_t delta) const {
  if (size_ + delta > kMaxTransactionSize) {
    throw Error(ErrorCode::kTransactionTooLarge,
                "transaction would grow to " + std::to_string(size_ + delta) + " bytes, over " +
                    std::to_string(kMaxTransactionSize));
  }
}

engine::Session& TransactionState::session() {
  if (!session_) session_ = engine_->begin();
  return *session_;
}

std::optional<std::string> TransactionState::store_get(std::string_view key) {
  std::optional<std::string> v = session().get(key);
  has_read_version_ = true;
  // (A key kept already has this value: one value per read version.)
  if ((v && v->size() > kMaxRecentValueSize) || recent_get(key) != nullptr) return v;
  if (recent_gets_.size() == kRecentGets) recent_gets_.erase(recent_gets_.begin());
  recent_gets_.emplace_back(std::string(key), v);
  return v;
}

const std::optional<std::string>* TransactionState::recent_get(std::string_view key) const {
  for (const auto& [k, v] : recent_gets_) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::optional<std::string> TransactionState::stored_value(std::string_view key) {
  if (const std::optional<std::string>* v = recent_get(key)) return *v;
  return store_get(key);
}

std::vector<KeyValue> TransactionState::store_range(std::string_view begin, std::string_view end,
                                                    int limit, bool reverse) {
  std::vector<KeyValue> v = session().get_range(begin, end, limit, reverse);
  has_read_version_ = true;
  return v;
}

void TransactionState::add_read_conflict(std::string begin, std::string end, bool unwritten) {
  size_ += unwritten ? conflicts_.add_read(overlay_, std::move(begin), std::move(end))
                     : conflicts_.add_read(std::move(begin), std::move(end));
}

}  // namespace kvq::detail
