// TransactionState: watches, commit, the retry loop's on_error, reset and usage. Reads and writes
// are in transaction_state.cc.
#include <algorithm>
#include <utility>

#include "client/transaction_state.h"
#include "common/bytes.h"
#include "common/clock.h"
#include "common/random.h"

namespace kvq::detail {
namespace {

// Delay before retry number `retries` (from 0): 1 ms doubling up to `cap_us`, jittered to
// [d/2, d], and no later than `remaining_us` (if >= 0).
std::int64_t backoff_us(int retries, std::int64_t cap_us, std::int64_t remaining_us) {
  std::int64_t delay = std::min<std::int64_t>(cap_us, std::int64_t{1000} << std::min(retries, 20));
  if (delay <= 0) return 0;
  delay = delay / 2 + static_cast<std::int64_t>(common::random_u64() % (delay / 2 + 1));
  if (remaining_us >= 0) delay = std::max<std::int64_t>(0, std::min(delay, remaining_us));
  return delay;
}

}  // namespace

void TransactionState::commit() {
  check_usable();
  state_ = State::kFailed;  // until the commit succeeds
  try {
    commit_attempt();
  } catch (...) {
    session_.reset();
    throw;
  }
  // The session pins its read version (and on RocksDB a snapshot): a transaction its caller keeps
  // after the commit must not hold the store's history down. A reset() or on_error() begins anew.
  session_.reset();
}

void TransactionState::commit_attempt() {
  try {
    if (!has_writes()) return commit_read_only();
    check_size();
    std::vector<std::optional<std::string>> seen = watch_values();
    engine::CommitResult result = session().commit(build_request());
    committed_version_ = result.version;
    versionstamp_ = std::move(result.versionstamp);
    state_ = State::kCommitted;
    counters_->commits.fetch_add(1, std::memory_order_relaxed);
    // The watches saw the read version (plus this transaction's writes): changes committed from
    // there on count, those before this commit too. Without a read, they saw only its writes.
    register_watches(seen, has_read_version_ ? session().read_version() : committed_version_);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kNotCommitted) {
      counters_->conflicts.fetch_add(1, std::memory_order_relaxed);
    }
    if (state_ != State::kCommitted) fail_pending_watches(e);
    throw;
  }
}

// Read-only: nothing to check (FoundationDB commits these trivially).
void TransactionState::commit_read_only() {
  if (!watches_.empty()) {
    std::vector<std::optional<std::string>> seen = watch_values();
    register_watches(seen, session().read_version());
  }
  committed_version_ = -1;
  versionstamp_.clear();
  state_ = State::kCommitted;
}

void TransactionState::check_size() const {
  if (size_ > kMaxTransactionSize) {
    throw Error(ErrorCode::kTransactionTooLarge, "transaction of " + std::to_string(size_) +
                                                     " bytes exceeds " +
                                                     std::to_string(kMaxTransactionSize));
  }
}

engine::CommitRequest TransactionState::build_request() {
  engine::CommitRequest request;
  // As FoundationDB: a transaction with read-conflict ranges but no read yet (only
  // add_read_conflict_range) takes its read version now, so the ranges are checked.
  request.read_version =
      has_read_version_ || conflicts_.has_reads() ? session().read_version() : -1;
  request.read_conflicts = conflicts_.take_reads();
  request.write_conflicts = conflicts_.take_writes();
  request.mutations = std::move(mutations_);
  return request;
}

Version TransactionState::get_committed_version() const {
  if (state_ != State::kCommitted) {
    throw Error(ErrorCode::kClientInvalidOperation, "the transaction has not committed");
  }
  if (committed_version_ < 0) {
    throw Error(ErrorCode::kNoCommitVersion, "a read-only transaction has no commit version");
  }
  return committed_version_;
}

std::string TransactionState::get_versionstamp() const {
  if (state_ != State::kCommitted) {
    throw Error(ErrorCode::kClientInvalidOperation, "the transaction has not committed");
  }
  if (versionstamp_.empty()) {
    throw Error(ErrorCode::kNoCommitVersion, "a read-only transaction has no versionstamp");
  }
  return versionstamp_;
}

void TransactionState::on_error(const Error& error) {
  if (!error.retryable()) throw error;
  if (timed_out()) {
    throw Error(ErrorCode::kTransactionTimedOut,
                "timeout expired while retrying: " + std::string(error.what()));
  }
  if (options_.retry_limit >= 0 && retries_ >= options_.retry_limit) throw error;
  using std::chrono::microseconds;
  const std::int64_t cap =
      std::chrono::duration_cast<microseconds>(options_.max_retry_delay).count();
  std::int64_t remaining = -1;  // no timeout
  if (options_.timeout.count() > 0) {
    remaining =
        std::max<std::int64_t>(0, std::chrono::duration_cast<microseconds>(
                                      start_ + options_.timeout - common::clock().steady_now())
                                      .count());
  }
  const std::int64_t delay = backoff_us(retries_, cap, remaining);
  if (delay > 0) common::clock().sleep_for(microseconds(delay));
  ++retries_;
  last_retried_ = error.what();
  counters_->retries.fetch_add(1, std::memory_order_relaxed);
  if (!watches_.empty())
    fail_pending_watches(Error(ErrorCode::kTransactionCancelled, "the transaction was retried"));
  clear_attempt();
}

void TransactionState::reset() {
  if (!watches_.empty())
    fail_pending_watches(Error(ErrorCode::kTransactionCancelled, "the transaction was reset"));
  clear_attempt();
  options_ = TransactionOptions{};
  retries_ = 0;
  last_retried_.clear();
  start_ = common::clock().steady_now();
}

TransactionUsage TransactionState::usage() {
  check_usable();
  // Engines without an operation bound count none: skip merging (copying) the read ranges.
  if (engine_->limits().max_operations == TransactionLimits{}.max_operations) {
    return {size_, 0, mutations_.size()};
  }
  return TransactionUsage{size_, session().operations(conflicts_.merged_reads(), mutations_),
                          mutations_.size()};
}

// The values the watches saw: the read version plus this transaction's writes. nullopt in the
// outer optional for keys whose value the transaction cannot know (versionstamped values).
std::vector<std::optional<std::string>> TransactionState::watch_values() {
  std::vector<std::optional<std::string>> out;
  out.reserve(watches_.size());
  watch_seen_.assign(watches_.size(), WatchSeen::kValue);
  for (std::size_t i = 0; i < watches_.size(); ++i) {
    try {
      out.push_back(watch_value(i));
    } catch (const Error& e) {
      // A read the commit does not need (transaction_too_old: its read version fell below the
      // MVCC floor) fails the watch, not the commit, as in FoundationDB.
      if (!e.retryable()) throw;
      watches_[i].state->fail(e);
      watch_seen_[i] = WatchSeen::kFailed;
      out.push_back(std::nullopt);
    }
  }
  return out;
}

std::optional<std::string> TransactionState::watch_value(std::size_t i) {
  const std::string& key = watches_[i].key;
  const LocalWrite* w = overlay_.find(key);
  if (w != nullptr && w->kind == WriteKind::kStampedValue) {
    watch_seen_[i] = WatchSeen::kStamped;
    return std::nullopt;
  }
  if (w != nullptr) {
    return WriteOverlay::value_of(*w, w->kind == WriteKind::kAdd ? stored_value(key) : std::nullopt,
                                  key);
  }
  if (overlay_.in_cleared(key)) return std::nullopt;
  return stored_value(key);
}

void TransactionState::register_watches(const std::vector<std::optional<std::string>>& seen,
                                        Version version) {
  for (std::size_t i = 0; i < watches_.size(); ++i) {
    PendingWatch& w = watches_[i];
    if (watch_seen_[i] == WatchSeen::kFailed) continue;
    try {
      std::optional<std::string> value = seen[i];
      if (watch_seen_[i] == WatchSeen::kStamped) {
        value = overlay_.committed_stamped_value(w.key, versionstamp_);
      }
      engine_->watch(w.key, std::move(value), version, w.state);
    } catch (const Error& e) {
      w.state->fail(e);
    }
  }
  watches_.clear();
}

void TransactionState::fail_pending_watches(const Error& error) {
  for (PendingWatch& w : watches_) w.state->fail(error);
  watches_.clear();
}

void TransactionState::clear_attempt() {
  session_.reset();
  recent_gets_.clear();
  overlay_.reset();
  conflicts_.reset();
  mutations_.clear();
  size_ = 0;
  has_read_version_ = false;
  committed_version_ = -1;
  versionstamp_.clear();
  state_ = State::kOpen;
}

}  // namespace kvq::detail
