// The public kvq::Transaction, kvq::Watch and kvq::Database: thin wrappers over the client's
// TransactionState (transaction_state.h) and the engine. Engines only see engine::Session
// (src/engine/engine.h).
#include "client/transaction_access.h"
#include "client/transaction_state.h"
#include "common/bytes.h"
#include "engine/engine.h"
#include "engine/watch_state.h"
#include "kvq/database.h"

namespace kvq {

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

std::vector<std::vector<KeyValue>> Transaction::get_ranges(std::span<const RangeRead> reads) {
  return live(state_).get_ranges(reads);
}

void Transaction::prefetch(std::span<const RangeRead> reads) { live(state_).prefetch(reads); }

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
void detail::TransactionAccess::add_read_conflict_on_absent_key(Transaction& tr,
                                                                std::string_view key) {
  live(tr.state_).add_read_conflict_on_absent_key(key);
}
void detail::TransactionAccess::add_read_conflict_as_read(Transaction& tr, std::string_view begin,
                                                          std::string_view end) {
  live(tr.state_).add_read_conflict_as_read(begin, end);
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
bool Transaction::has_writes() const { return live(state_).has_writes(); }
TransactionUsage Transaction::usage() { return live(state_).usage(); }

// ---- Watch ----

namespace {

// What a watch's copies share: cancels the watch when the last copy is gone (no effect on one
// that fired or failed).
class WatchHandle {
 public:
  explicit WatchHandle(std::shared_ptr<detail::WatchState> state) : state_(std::move(state)) {}
  WatchHandle(const WatchHandle&) = delete;
  WatchHandle& operator=(const WatchHandle&) = delete;
  ~WatchHandle() { state_->fail(Error(ErrorCode::kOperationCancelled, "the watch was dropped")); }
  detail::WatchState* state() const { return state_.get(); }

 private:
  std::shared_ptr<detail::WatchState> state_;
};

}  // namespace

Watch::Watch(std::shared_ptr<detail::WatchState> state) {
  if (!state) return;
  auto handle = std::make_shared<WatchHandle>(std::move(state));
  detail::WatchState* raw = handle->state();
  state_ = std::shared_ptr<detail::WatchState>(std::move(handle), raw);  // aliasing
}

bool Watch::wait_for(std::chrono::milliseconds timeout) const {
  if (!state_) throw Error(ErrorCode::kClientInvalidOperation, "wait on an empty watch");
  return state_->wait_for(timeout);
}

void Watch::wait() const {
  while (!wait_for(std::chrono::hours(1))) {
  }
}

bool Watch::ready() const { return state_ && state_->ready(); }

bool Watch::wait_any(std::span<const Watch> watches, std::chrono::milliseconds timeout) {
  auto waker = std::make_shared<detail::WatchWaker>();
  for (const Watch& w : watches) {
    if (!w.state_) throw Error(ErrorCode::kClientInvalidOperation, "wait on an empty watch");
    w.state_->wake_when_ready(waker);
  }
  waker->wait_for(timeout);
  bool fired = false;
  for (const Watch& w : watches) {
    if (w.ready()) fired = w.wait_for(std::chrono::milliseconds(0)) || fired;  // throws a failure
  }
  return fired;
}

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

bool Database::commits_can_be_unknown() const { return engine_->commits_can_be_unknown(); }

bool Database::reads_take_round_trips() const { return engine_->reads_take_round_trips(); }

DatabaseStats Database::stats() const {
  DatabaseStats s;
  s.commits = counters_->commits.load(std::memory_order_relaxed);
  s.conflicts = counters_->conflicts.load(std::memory_order_relaxed);
  s.retries = counters_->retries.load(std::memory_order_relaxed);
  s.commit_batches = engine_->commit_batches();
  return s;
}

}  // namespace kvq
