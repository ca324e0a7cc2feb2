// The client side of kvq::Transaction (read-your-writes, conflict ranges, limits, retries),
// kvq::Watch and kvq::Database. Engines only see engine::Session (src/engine/engine.h).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <thread>

#include "kvq/database.h"
#include "engine/engine.h"
#include "common/bytes.h"
#include "common/random.h"
#include "engine/watch_state.h"

namespace kvq {
namespace detail {

using engine::KeyRange;
using engine::Mutation;
using engine::MutationType;
using common::add_le;
using common::key_after;

struct DatabaseCounters {
  std::atomic<std::uint64_t> commits{0};
  std::atomic<std::uint64_t> conflicts{0};
  std::atomic<std::uint64_t> retries{0};
};

namespace {

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

}  // namespace

class TransactionState {
 public:
  TransactionState(std::shared_ptr<engine::Engine> engine,
                   std::shared_ptr<DatabaseCounters> counters, const TransactionOptions& options)
      : engine_(std::move(engine)), counters_(std::move(counters)) {
    validate_options(options);
    options_ = options;
    start_ = std::chrono::steady_clock::now();
  }

  ~TransactionState() {
    fail_pending_watches(Error(ErrorCode::kTransactionCancelled,
                               "the transaction was destroyed before it committed"));
  }

  // ---- reads ----

  std::optional<std::string> get(std::string_view key, bool snapshot) {
    check_usable();
    check_key(key);
    auto it = writes_.find(key);
    if (it != writes_.end()) {
      const LocalWrite& w = it->second;
      if (w.kind != WriteKind::kAdd) return resolve_local(w, std::nullopt, key);
      std::optional<std::string> stored = store_get(key);
      if (!snapshot) add_read_conflict_raw(std::string(key), key_after(key));
      return resolve_local(w, stored, key);
    }
    if (in_cleared(key)) return std::nullopt;
    std::optional<std::string> stored = store_get(key);
    if (!snapshot) add_read_conflict_raw(std::string(key), key_after(key));
    return stored;
  }

  std::vector<KeyValue> get_range(std::string_view begin, std::string_view end,
                                  const RangeOptions& options) {
    check_usable();
    check_range(begin, end);
    if (options.limit < 0) throw Error(ErrorCode::kInvalidArgument, "range limit must be >= 0");
    std::vector<KeyValue> out;
    if (begin == end) return out;
    RangeRead read{this, options.limit > 0 ? static_cast<std::size_t>(options.limit) : SIZE_MAX,
                   options.limit > 0, &out};
    if (!options.reverse) {
      read.forward(begin, end);
    } else {
      read.reverse(begin, end);
    }
    if (!options.snapshot) {
      if (read.hit_limit) {
        if (!options.reverse) {
          add_read_conflict_unwritten(std::string(begin), key_after(out.back().key));
        } else {
          add_read_conflict_unwritten(out.back().key, std::string(end));
        }
      } else {
        add_read_conflict_unwritten(std::string(begin), std::string(end));
      }
    }
    return out;
  }

  Version get_read_version() {
    check_usable();
    Version v = session().read_version();
    has_read_version_ = true;
    return v;
  }

  // ---- writes ----

  void set(std::string_view key, std::string_view value) {
    check_usable();
    check_key(key);
    check_value(value.size());
    const std::size_t delta = key.size() + value.size() + conflict_size(key);
    reserve(delta);
    LocalWrite& w = writes_[std::string(key)];
    w.kind = WriteKind::kSet;
    w.value.assign(value);
    w.operands.clear();
    mutations_.push_back({MutationType::kSet, std::string(key), std::string(value)});
    write_conflicts_.push_back({std::string(key), key_after(key)});
    size_ += delta;
  }

  void clear(std::string_view key) {
    check_usable();
    check_key(key);
    const std::size_t delta = key.size() + conflict_size(key);
    reserve(delta);
    LocalWrite& w = writes_[std::string(key)];
    w.kind = WriteKind::kClear;
    w.value.clear();
    w.operands.clear();
    mutations_.push_back({MutationType::kClear, std::string(key), {}});
    write_conflicts_.push_back({std::string(key), key_after(key)});
    size_ += delta;
  }

  void clear_range(std::string_view begin, std::string_view end) {
    check_usable();
    check_range(begin, end);
    if (begin == end) return;
    const std::size_t delta = 2 * (begin.size() + end.size());
    reserve(delta);
    writes_.erase(writes_.lower_bound(begin), writes_.lower_bound(end));
    std::string nb(begin);
    std::string ne(end);
    auto it = cleared_.upper_bound(nb);
    if (it != cleared_.begin() && std::prev(it)->second >= nb) {
      --it;
      nb = it->first;
    }
    while (it != cleared_.end() && it->first <= ne) {
      if (ne < it->second) ne = it->second;
      it = cleared_.erase(it);
    }
    cleared_.emplace(nb, ne);
    mutations_.push_back({MutationType::kClearRange, std::string(begin), std::string(end)});
    write_conflicts_.push_back({std::string(begin), std::string(end)});
    size_ += delta;
  }

  void atomic_add(std::string_view key, std::string_view operand) {
    check_usable();
    check_key(key);
    check_value(operand.size());
    const std::size_t delta = key.size() + operand.size() + conflict_size(key);
    reserve(delta);
    auto it = writes_.find(key);
    if (it != writes_.end()) {
      LocalWrite& w = it->second;
      switch (w.kind) {
        case WriteKind::kSet:
          w.value = add_le(w.value, operand);
          break;
        case WriteKind::kClear:
          w.kind = WriteKind::kSet;
          w.value = add_le(std::nullopt, operand);
          break;
        case WriteKind::kAdd:
          w.operands.emplace_back(operand);
          break;
        case WriteKind::kStampedValue:
          w.operands.emplace_back(operand);  // stays unreadable until commit
          break;
      }
    } else if (in_cleared(key)) {
      LocalWrite& w = writes_[std::string(key)];
      w.kind = WriteKind::kSet;
      w.value = add_le(std::nullopt, operand);
    } else {
      LocalWrite& w = writes_[std::string(key)];
      w.kind = WriteKind::kAdd;
      w.operands.emplace_back(operand);
    }
    mutations_.push_back({MutationType::kAddValue, std::string(key), std::string(operand)});
    write_conflicts_.push_back({std::string(key), key_after(key)});
    size_ += delta;
  }

  void set_versionstamped_key(std::string_view key_with_offset, std::string_view value) {
    check_usable();
    const std::size_t key_size = check_stamp_param(key_with_offset, "key");
    if (key_size > kMaxKeySize) check_key(key_with_offset.substr(0, key_size));
    check_value(value.size());
    const std::size_t delta = key_with_offset.size() + value.size() + 2 * key_size + 1;
    reserve(delta);
    mutations_.push_back(
        {MutationType::kSetVersionstampedKey, std::string(key_with_offset), std::string(value)});
    size_ += delta;
  }

  void set_versionstamped_value(std::string_view key, std::string_view value_with_offset) {
    check_usable();
    check_key(key);
    const std::size_t value_size = check_stamp_param(value_with_offset, "value");
    check_value(value_size);
    const std::size_t delta = key.size() + value_with_offset.size() + conflict_size(key);
    reserve(delta);
    LocalWrite& w = writes_[std::string(key)];
    w.kind = WriteKind::kStampedValue;
    w.value.assign(value_with_offset);
    w.operands.clear();
    mutations_.push_back(
        {MutationType::kSetVersionstampedValue, std::string(key), std::string(value_with_offset)});
    write_conflicts_.push_back({std::string(key), key_after(key)});
    size_ += delta;
  }

  void add_read_conflict_range(std::string_view begin, std::string_view end) {
    check_usable();
    check_range(begin, end);
    if (begin == end) return;
    add_read_conflict_raw(std::string(begin), std::string(end));
  }

  void add_write_conflict_range(std::string_view begin, std::string_view end) {
    check_usable();
    check_range(begin, end);
    if (begin == end) return;
    const std::size_t delta = begin.size() + end.size();
    reserve(delta);
    write_conflicts_.push_back({std::string(begin), std::string(end)});
    size_ += delta;
  }

  // ---- watches, commit, retries ----

  Watch watch(std::string_view key) {
    check_usable();
    check_key(key);
    auto state = std::make_shared<WatchState>();
    watches_.push_back({std::string(key), state});
    return Watch(state);
  }

  void commit() {
    check_usable();
    state_ = State::kFailed;  // until the commit succeeds
    try {
      if (mutations_.empty() && write_conflicts_.empty()) {
        // Read-only: nothing to check (FoundationDB commits these trivially).
        if (!watches_.empty()) {
          std::vector<std::optional<std::string>> seen = watch_values();
          register_watches(seen, session().read_version());
        }
        committed_version_ = -1;
        versionstamp_.clear();
        state_ = State::kCommitted;
        return;
      }
      if (size_ > kMaxTransactionSize) {
        throw Error(ErrorCode::kTransactionTooLarge, "transaction of " + std::to_string(size_) +
                                                         " bytes exceeds " +
                                                         std::to_string(kMaxTransactionSize));
      }
      std::vector<std::optional<std::string>> seen = watch_values();
      engine::CommitRequest request;
      // As FoundationDB: a transaction with read-conflict ranges but no read yet (only
      // add_read_conflict_range) takes its read version now, so the ranges are checked.
      request.read_version =
          has_read_version_ || !read_conflicts_.empty() ? session().read_version() : -1;
      request.read_conflicts = common::merge_ranges(std::move(read_conflicts_));
      request.write_conflicts = common::merge_ranges(std::move(write_conflicts_));
      request.mutations = std::move(mutations_);
      engine::CommitResult result = session().commit(std::move(request));
      committed_version_ = result.version;
      versionstamp_ = std::move(result.versionstamp);
      state_ = State::kCommitted;
      counters_->commits.fetch_add(1, std::memory_order_relaxed);
      register_watches(seen, committed_version_);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kNotCommitted) {
        counters_->conflicts.fetch_add(1, std::memory_order_relaxed);
      }
      if (state_ != State::kCommitted) fail_pending_watches(e);
      throw;
    }
  }

  Version get_committed_version() const {
    if (state_ != State::kCommitted) {
      throw Error(ErrorCode::kClientInvalidOperation, "the transaction has not committed");
    }
    if (committed_version_ < 0) {
      throw Error(ErrorCode::kNoCommitVersion, "a read-only transaction has no commit version");
    }
    return committed_version_;
  }

  std::string get_versionstamp() const {
    if (state_ != State::kCommitted) {
      throw Error(ErrorCode::kClientInvalidOperation, "the transaction has not committed");
    }
    if (versionstamp_.empty()) {
      throw Error(ErrorCode::kNoCommitVersion, "a read-only transaction has no versionstamp");
    }
    return versionstamp_;
  }

  void on_error(const Error& error) {
    if (!error.retryable()) throw error;
    if (timed_out()) {
      throw Error(ErrorCode::kTransactionTimedOut,
                  "timeout expired while retrying: " + std::string(error.what()));
    }
    if (options_.retry_limit >= 0 && retries_ >= options_.retry_limit) throw error;
    // Exponential back-off: 1 ms doubling up to max_retry_delay, jittered to [d/2, d].
    using std::chrono::microseconds;
    const std::int64_t cap =
        std::chrono::duration_cast<microseconds>(options_.max_retry_delay).count();
    std::int64_t delay = std::min<std::int64_t>(cap, std::int64_t{1000} << std::min(retries_, 20));
    if (delay > 0) {
      delay = delay / 2 + static_cast<std::int64_t>(common::random_u64() % (delay / 2 + 1));
      if (options_.timeout.count() > 0) {
        auto remaining = std::chrono::duration_cast<microseconds>(start_ + options_.timeout -
                                                                  std::chrono::steady_clock::now());
        delay = std::max<std::int64_t>(0, std::min<std::int64_t>(delay, remaining.count()));
      }
      std::this_thread::sleep_for(microseconds(delay));
    }
    ++retries_;
    counters_->retries.fetch_add(1, std::memory_order_relaxed);
    clear_attempt(Error(ErrorCode::kTransactionCancelled, "the transaction was retried"));
  }

  void reset() {
    clear_attempt(Error(ErrorCode::kTransactionCancelled, "the transaction was reset"));
    options_ = TransactionOptions{};
    retries_ = 0;
    start_ = std::chrono::steady_clock::now();
  }

  void set_options(const TransactionOptions& options) {
    validate_options(options);
    options_ = options;
  }
  const TransactionOptions& options() const { return options_; }
  std::size_t approximate_size() const { return size_; }

  TransactionUsage usage() {
    check_usable();
    return TransactionUsage{
        size_, session().operations(common::merge_ranges(read_conflicts_), mutations_)};
  }

 private:
  enum class WriteKind { kSet, kClear, kAdd, kStampedValue };
  // The transaction's own effect on one key.
  struct LocalWrite {
    WriteKind kind = WriteKind::kSet;
    std::string value;                  // kSet: the value the transaction reads back;
                                        // kStampedValue: the value with its offset suffix
    std::vector<std::string> operands;  // kAdd, kStampedValue: ADDs applied after, in order
  };
  struct PendingWatch {
    std::string key;
    std::shared_ptr<WatchState> state;
  };
  enum class State { kOpen, kCommitted, kFailed };

  // One get_range call: merges store pairs with local writes, fetching more from the store when
  // local clears hide what it returned.
  struct RangeRead {
    TransactionState* tr;
    std::size_t max;
    bool limited;
    std::vector<KeyValue>* out;
    bool hit_limit = false;

    void emit(std::string key, std::string value) {
      out->push_back({std::move(key), std::move(value)});
      if (limited && out->size() >= max) hit_limit = true;
    }
    int need() const { return limited ? static_cast<int>(max - out->size()) : 0; }

    void forward(std::string_view begin, std::string_view end) {
      std::string cursor(begin);
      while (!hit_limit && std::string_view(cursor) < end) {
        auto c = tr->cleared_.upper_bound(cursor);
        if (c != tr->cleared_.begin() && std::prev(c)->second > cursor) {
          // [cursor, seg_end) is cleared locally: only local writes after the clear show.
          std::string seg_end = std::min(std::prev(c)->second, std::string(end));
          for (auto it = tr->writes_.lower_bound(cursor);
               !hit_limit && it != tr->writes_.end() && it->first < seg_end; ++it) {
            std::optional<std::string> v = tr->resolve_local(it->second, std::nullopt, it->first);
            if (v) emit(it->first, std::move(*v));
          }
          cursor = std::move(seg_end);
          continue;
        }
        std::string seg_end(c != tr->cleared_.end() && std::string_view(c->first) < end
                                ? std::string_view(c->first)
                                : end);
        while (!hit_limit && cursor < seg_end) {
          const int n = need();
          std::vector<KeyValue> fetched = tr->store_range(cursor, seg_end, n, false);
          const bool complete = n == 0 || fetched.size() < static_cast<std::size_t>(n);
          std::string upto = complete ? seg_end : key_after(fetched.back().key);
          auto w = tr->writes_.lower_bound(cursor);
          std::size_t f = 0;
          while (!hit_limit) {
            const bool has_w = w != tr->writes_.end() && w->first < upto;
            const bool has_f = f < fetched.size();
            if (!has_w && !has_f) break;
            if (has_w && (!has_f || w->first <= fetched[f].key)) {
              std::optional<std::string> stored;
              if (has_f && w->first == fetched[f].key) stored = std::move(fetched[f++].value);
              std::optional<std::string> v = tr->resolve_local(w->second, stored, w->first);
              if (v) emit(w->first, std::move(*v));
              ++w;
            } else {
              emit(std::move(fetched[f].key), std::move(fetched[f].value));
              ++f;
            }
          }
          cursor = std::move(upto);
        }
      }
    }

    void reverse(std::string_view begin, std::string_view end) {
      std::string cursor(end);  // exclusive upper bound of what is left
      while (!hit_limit && begin < std::string_view(cursor)) {
        auto c = tr->cleared_.lower_bound(cursor);
        const bool has_c = c != tr->cleared_.begin();
        if (has_c) --c;
        if (has_c && c->second >= cursor) {
          std::string seg_begin = std::max(c->first, std::string(begin));
          auto it = tr->writes_.lower_bound(cursor);
          while (!hit_limit && it != tr->writes_.begin() && std::prev(it)->first >= seg_begin) {
            --it;
            std::optional<std::string> v = tr->resolve_local(it->second, std::nullopt, it->first);
            if (v) emit(it->first, std::move(*v));
          }
          cursor = std::move(seg_begin);
          continue;
        }
        std::string seg_begin(
            has_c && begin < std::string_view(c->second) ? std::string_view(c->second) : begin);
        while (!hit_limit && seg_begin < cursor) {
          const int n = need();
          std::vector<KeyValue> fetched = tr->store_range(seg_begin, cursor, n, true);
          const bool complete = n == 0 || fetched.size() < static_cast<std::size_t>(n);
          std::string lower = complete ? seg_begin : fetched.back().key;
          auto w = tr->writes_.lower_bound(cursor);  // one past the next local write
          std::size_t f = 0;
          while (!hit_limit) {
            const bool has_w = w != tr->writes_.begin() && std::prev(w)->first >= lower;
            const bool has_f = f < fetched.size();
            if (!has_w && !has_f) break;
            if (has_w && (!has_f || std::prev(w)->first >= fetched[f].key)) {
              --w;
              std::optional<std::string> stored;
              if (has_f && w->first == fetched[f].key) stored = std::move(fetched[f++].value);
              std::optional<std::string> v = tr->resolve_local(w->second, stored, w->first);
              if (v) emit(w->first, std::move(*v));
            } else {
              emit(std::move(fetched[f].key), std::move(fetched[f].value));
              ++f;
            }
          }
          cursor = std::move(lower);
        }
      }
    }
  };

  static std::size_t conflict_size(std::string_view key) { return 2 * key.size() + 1; }

  void check_usable() {
    if (state_ == State::kCommitted) {
      throw Error(ErrorCode::kClientInvalidOperation,
                  "the transaction already committed; reset() it before reuse");
    }
    if (state_ == State::kFailed) {
      throw Error(ErrorCode::kClientInvalidOperation,
                  "the transaction's commit failed; call on_error() or reset() first");
    }
    if (timed_out()) {
      throw Error(ErrorCode::kTransactionTimedOut, "the transaction passed its timeout of " +
                                                       std::to_string(options_.timeout.count()) +
                                                       " ms");
    }
  }

  bool timed_out() const {
    return options_.timeout.count() > 0 &&
           std::chrono::steady_clock::now() - start_ >= options_.timeout;
  }

  void reserve(std::size_t delta) const {
    if (size_ + delta > kMaxTransactionSize) {
      throw Error(ErrorCode::kTransactionTooLarge,
                  "transaction would grow to " + std::to_string(size_ + delta) + " bytes, over " +
                      std::to_string(kMaxTransactionSize));
    }
  }

  // Validates a versionstamp parameter (ending in a 4-byte LE offset); returns its size without
  // the offset.
  static std::size_t check_stamp_param(std::string_view with_offset, const char* what) {
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

  engine::Session& session() {
    if (!session_) session_ = engine_->begin();
    return *session_;
  }

  std::optional<std::string> store_get(std::string_view key) {
    std::optional<std::string> v = session().get(key);
    has_read_version_ = true;
    return v;
  }

  std::vector<KeyValue> store_range(std::string_view begin, std::string_view end, int limit,
                                    bool reverse) {
    std::vector<KeyValue> v = session().get_range(begin, end, limit, reverse);
    has_read_version_ = true;
    return v;
  }

  bool in_cleared(std::string_view key) const {
    auto it = cleared_.upper_bound(key);
    if (it == cleared_.begin()) return false;
    --it;
    return key < std::string_view(it->second);
  }

  // The value the transaction sees for a key it wrote, given the committed value `stored`.
  std::optional<std::string> resolve_local(const LocalWrite& w,
                                           const std::optional<std::string>& stored,
                                           std::string_view key) const {
    switch (w.kind) {
      case WriteKind::kSet:
        return w.value;
      case WriteKind::kClear:
        return std::nullopt;
      case WriteKind::kAdd: {
        std::optional<std::string> v = stored;
        for (const std::string& op : w.operands) v = add_le(v, op);
        return v;
      }
      case WriteKind::kStampedValue:
        break;
    }
    throw Error(ErrorCode::kClientInvalidOperation,
                "accessed_unreadable: key '" + std::string(key) +
                    "' has a versionstamped value set by this transaction");
  }

  void add_read_conflict_raw(std::string begin, std::string end) {
    size_ += begin.size() + end.size();
    read_conflicts_.push_back({std::move(begin), std::move(end)});
  }

  // Adds [begin, end) minus the parts this transaction wrote independently of the committed
  // value (sets, clears, cleared ranges), as FoundationDB's RYW does: reading what you wrote
  // yourself does not depend on anyone else. Keys with pending ADDs still conflict.
  void add_read_conflict_unwritten(std::string begin, std::string end) {
    if (writes_.empty() && cleared_.empty()) {
      add_read_conflict_raw(std::move(begin), std::move(end));
      return;
    }
    std::vector<KeyRange> covered;
    auto c = cleared_.upper_bound(begin);
    if (c != cleared_.begin() && std::prev(c)->second > begin) --c;
    for (; c != cleared_.end() && c->first < end; ++c) covered.push_back({c->first, c->second});
    for (auto w = writes_.lower_bound(begin); w != writes_.end() && w->first < end; ++w) {
      if (w->second.kind != WriteKind::kAdd) covered.push_back({w->first, key_after(w->first)});
    }
    covered = common::merge_ranges(std::move(covered));
    std::string cur = std::move(begin);
    for (KeyRange& r : covered) {
      if (cur < r.begin) add_read_conflict_raw(cur, std::min(r.begin, end));
      if (cur < r.end) cur = std::move(r.end);
      if (!(cur < end)) return;
    }
    if (cur < end) add_read_conflict_raw(std::move(cur), std::move(end));
  }

  // The values the watches saw: the read version plus this transaction's writes. nullopt in the
  // outer optional for keys whose value the transaction cannot know (versionstamped values).
  std::vector<std::optional<std::string>> watch_values() {
    std::vector<std::optional<std::string>> out;
    out.reserve(watches_.size());
    unknown_watch_values_.assign(watches_.size(), false);
    for (std::size_t i = 0; i < watches_.size(); ++i) {
      const std::string& key = watches_[i].key;
      auto it = writes_.find(key);
      if (it != writes_.end()) {
        if (it->second.kind == WriteKind::kStampedValue) {
          unknown_watch_values_[i] = true;
          out.push_back(std::nullopt);
        } else if (it->second.kind == WriteKind::kAdd) {
          out.push_back(resolve_local(it->second, session().get(key), key));
        } else {
          out.push_back(resolve_local(it->second, std::nullopt, key));
        }
      } else if (in_cleared(key)) {
        out.push_back(std::nullopt);
      } else {
        out.push_back(session().get(key));
      }
    }
    return out;
  }

  void register_watches(const std::vector<std::optional<std::string>>& seen, Version version) {
    for (std::size_t i = 0; i < watches_.size(); ++i) {
      PendingWatch& w = watches_[i];
      try {
        std::optional<std::string> value = seen[i];
        if (unknown_watch_values_[i]) value = committed_stamped_value(w.key);
        engine_->watch(w.key, std::move(value), version, w.state);
      } catch (const Error& e) {
        w.state->fail(e);
      }
    }
    watches_.clear();
  }

  // After a successful commit: the value this transaction gave `key` with
  // set_versionstamped_value (its commit's versionstamp substituted, later ADDs applied).
  std::string committed_stamped_value(const std::string& key) const {
    const LocalWrite& w = writes_.find(key)->second;
    const std::size_t size = w.value.size() - 4;  // validated by check_stamp_param
    std::string value = w.value.substr(0, size);
    value.replace(common::decode_le32(std::string_view(w.value).substr(size)), 10, versionstamp_);
    for (const std::string& op : w.operands) value = add_le(value, op);
    return value;
  }

  void fail_pending_watches(const Error& error) {
    for (PendingWatch& w : watches_) w.state->fail(error);
    watches_.clear();
  }

  void clear_attempt(const Error& watch_error) {
    fail_pending_watches(watch_error);
    session_.reset();
    writes_.clear();
    cleared_.clear();
    mutations_.clear();
    read_conflicts_.clear();
    write_conflicts_.clear();
    size_ = 0;
    has_read_version_ = false;
    committed_version_ = -1;
    versionstamp_.clear();
    state_ = State::kOpen;
  }

  std::shared_ptr<engine::Engine> engine_;
  std::shared_ptr<DatabaseCounters> counters_;
  TransactionOptions options_;
  std::chrono::steady_clock::time_point start_;
  int retries_ = 0;

  std::unique_ptr<engine::Session> session_;
  bool has_read_version_ = false;
  std::map<std::string, LocalWrite, std::less<>> writes_;
  std::map<std::string, std::string, std::less<>> cleared_;  // coalesced [begin, end) ranges
  std::vector<Mutation> mutations_;
  std::vector<KeyRange> read_conflicts_;
  std::vector<KeyRange> write_conflicts_;
  std::size_t size_ = 0;
  std::vector<PendingWatch> watches_;
  std::vector<bool> unknown_watch_values_;

  State state_ = State::kOpen;
  Version committed_version_ = -1;
  std::string versionstamp_;
};

}  // namespace detail

// ---- Transaction ----

namespace {
detail::TransactionState& live(const std::unique_ptr<detail::TransactionState>& state) {
  if (!state) throw Error(ErrorCode::kClientInvalidOperation, "use of a moved-from transaction");
  return *state;
}
}  // namespace

Transaction::Transaction(std::unique_ptr<detail::TransactionState> state)
    : state_(std::move(state)) {}
Transaction::Transaction(Transaction&&) noexcept = default;
Transaction& Transaction::operator=(Transaction&&) noexcept = default;
Transaction::~Transaction() = default;

std::optional<std::string> Transaction::get(std::string_view key, bool snapshot) {
  return live(state_).get(key, snapshot);
}
std::vector<KeyValue> Transaction::get_range(std::string_view begin, std::string_view end,
                                             RangeOptions options) {
  return live(state_).get_range(begin, end, options);
}
void Transaction::set(std::string_view key, std::string_view value) {
  live(state_).set(key, value);
}
void Transaction::clear(std::string_view key) { live(state_).clear(key); }
void Transaction::clear_range(std::string_view begin, std::string_view end) {
  live(state_).clear_range(begin, end);
}
void Transaction::atomic_add(std::string_view key, std::string_view operand) {
  live(state_).atomic_add(key, operand);
}
void Transaction::atomic_add(std::string_view key, std::int64_t delta) {
  live(state_).atomic_add(key, common::encode_le64(delta));
}
void Transaction::set_versionstamped_key(std::string_view key_with_offset, std::string_view value) {
  live(state_).set_versionstamped_key(key_with_offset, value);
}
void Transaction::set_versionstamped_value(std::string_view key,
                                           std::string_view value_with_offset) {
  live(state_).set_versionstamped_value(key, value_with_offset);
}
void Transaction::add_read_conflict_range(std::string_view begin, std::string_view end) {
  live(state_).add_read_conflict_range(begin, end);
}
void Transaction::add_read_conflict_key(std::string_view key) {
  live(state_).add_read_conflict_range(key, common::key_after(key));
}
void Transaction::add_write_conflict_range(std::string_view begin, std::string_view end) {
  live(state_).add_write_conflict_range(begin, end);
}
void Transaction::add_write_conflict_key(std::string_view key) {
  live(state_).add_write_conflict_range(key, common::key_after(key));
}
Version Transaction::get_read_version() { return live(state_).get_read_version(); }
Watch Transaction::watch(std::string_view key) { return live(state_).watch(key); }
void Transaction::commit() { live(state_).commit(); }
Version Transaction::get_committed_version() const { return live(state_).get_committed_version(); }
std::string Transaction::get_versionstamp() const { return live(state_).get_versionstamp(); }
void Transaction::on_error(const Error& error) { live(state_).on_error(error); }
void Transaction::reset() { live(state_).reset(); }
void Transaction::set_options(const TransactionOptions& options) {
  live(state_).set_options(options);
}
const TransactionOptions& Transaction::options() const { return live(state_).options(); }
std::size_t Transaction::approximate_size() const { return live(state_).approximate_size(); }
TransactionUsage Transaction::usage() { return live(state_).usage(); }

// ---- Watch ----

bool Watch::wait_for(std::chrono::milliseconds timeout) const {
  if (!state_) throw Error(ErrorCode::kClientInvalidOperation, "wait on an empty watch");
  return state_->wait_for(timeout);
}

void Watch::wait() const {
  while (!wait_for(std::chrono::hours(1))) {
  }
}

bool Watch::ready() const { return state_ && state_->ready(); }

void Watch::cancel() {
  if (state_) state_->fail(Error(ErrorCode::kOperationCancelled, "the watch was cancelled"));
}

// ---- Database ----

Database::Database(std::shared_ptr<engine::Engine> engine, std::string url)
    : engine_(std::move(engine)),
      url_(std::move(url)),
      counters_(std::make_shared<detail::DatabaseCounters>()) {
  if (!engine_) throw Error(ErrorCode::kInvalidArgument, "Database needs an engine");
}

Database::~Database() = default;

Transaction Database::create_transaction(const TransactionOptions& options) {
  return Transaction(std::make_unique<detail::TransactionState>(engine_, counters_, options));
}

const std::string& Database::url() const { return url_; }

TransactionLimits Database::limits() const { return engine_->limits(); }

DatabaseStats Database::stats() const {
  DatabaseStats s;
  s.commits = counters_->commits.load(std::memory_order_relaxed);
  s.conflicts = counters_->conflicts.load(std::memory_order_relaxed);
  s.retries = counters_->retries.load(std::memory_order_relaxed);
  s.commit_batches = engine_->commit_batches();
  return s;
}

}  // namespace kvq
