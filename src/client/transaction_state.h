// Internal: the state behind kvq::Transaction. Reads go to the engine session at one read
// version, merged with the transaction's own writes (WriteOverlay, RangeMerge); writes are
// buffered as engine mutations and in the overlay; non-snapshot reads and writes are recorded as
// conflict ranges (ConflictRanges); commit() sends it all to the engine once. Limits, timeouts and
// the retry back-off (on_error) are enforced here. The public methods have the contracts of
// kvq::Transaction's (include/kvq/database.h).
//
// Thread safety: none (a transaction is used by one thread at a time).
#ifndef KVQ_SRC_CLIENT_TRANSACTION_STATE_H_
#define KVQ_SRC_CLIENT_TRANSACTION_STATE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/conflict_ranges.h"
#include "client/write_overlay.h"
#include "engine/engine.h"
#include "engine/watch_state.h"
#include "kvq/database.h"

namespace kvq::detail {

// The counters behind Database::stats().
struct DatabaseCounters {
  std::atomic<std::uint64_t> commits{0};
  std::atomic<std::uint64_t> conflicts{0};
  std::atomic<std::uint64_t> retries{0};
};

class TransactionState {
 public:
  // Throws invalid_option_value for bad options.
  TransactionState(std::shared_ptr<engine::Engine> engine,
                   std::shared_ptr<DatabaseCounters> counters, const TransactionOptions& options);
  // Fails the watches of an uncommitted transaction (transaction_cancelled).
  ~TransactionState();

  // ---- reads (transaction_state.cc) ----
  std::optional<std::string> get(std::string_view key, bool snapshot);
  std::vector<KeyValue> get_range(std::string_view begin, std::string_view end,
                                  const RangeOptions& options);
  // get_range of each read, the engine asked first for all the ranges the reads will fetch.
  std::vector<std::vector<KeyValue>> get_ranges(std::span<const RangeRead> reads);
  // Asks the engine for all of `reads` at once (Session::prefetch), if there are two or more.
  void prefetch(std::span<const RangeRead> reads);
  Version get_read_version();

  // ---- writes (transaction_state.cc) ----
  void set(std::string_view key, std::string_view value);
  void clear(std::string_view key);
  void clear_range(std::string_view begin, std::string_view end);
  void atomic_add(std::string_view key, std::string_view operand);
  void set_versionstamped_key(std::string_view key_with_offset, std::string_view value);
  void set_versionstamped_value(std::string_view key, std::string_view value_with_offset);
  void add_read_conflict_range(std::string_view begin, std::string_view end);
  // As a non-snapshot read of [begin, end) adds it: less what this transaction set or cleared.
  void add_read_conflict_as_read(std::string_view begin, std::string_view end);
  // As add_read_conflict_range over `key` alone, which the caller knows has no value at the read
  // version (engine::Session::note_absent).
  void add_read_conflict_on_absent_key(std::string_view key);
  void add_write_conflict_range(std::string_view begin, std::string_view end);

  // ---- watches, commit, retries (transaction_commit.cc) ----
  Watch watch(std::string_view key);
  void commit();
  Version get_committed_version() const;
  std::string get_versionstamp() const;
  void on_error(const Error& error);
  void reset();
  void set_options(const TransactionOptions& options);
  const TransactionOptions& options() const { return options_; }
  std::size_t approximate_size() const { return size_; }
  bool has_writes() const { return !mutations_.empty() || conflicts_.has_writes(); }
  TransactionUsage usage();

 private:
  struct PendingWatch {
    std::string key;
    std::shared_ptr<WatchState> state;
  };
  enum class State { kOpen, kCommitted, kFailed };

  // Throws unless the transaction can take another operation (open, not timed out).
  void check_usable();
  bool timed_out() const;
  // Throws transaction_too_large unless `delta` more bytes fit.
  void reserve(std::size_t delta) const;
  // Records a buffered mutation and its write-conflict range, `delta` bytes in all.
  void record(engine::Mutation m, bool conflict, std::size_t delta);

  engine::Session& session();
  // The key's value in the store at the read version (remembered in recent_gets_ if it is small).
  std::optional<std::string> store_get(std::string_view key);
  // The value recent_gets_ keeps for `key`, or null if it keeps none.
  const std::optional<std::string>* recent_get(std::string_view key) const;
  // store_get(key), without asking the store again if it is one of recent_gets_.
  std::optional<std::string> stored_value(std::string_view key);
  std::vector<KeyValue> store_range(std::string_view begin, std::string_view end, int limit,
                                    bool reverse);
  void add_read_conflict(std::string begin, std::string end, bool unwritten);
  // add_read_conflict after the checks of an explicit range (usable, begin <= end, not empty).
  void add_checked_read_conflict(std::string_view begin, std::string_view end, bool unwritten);

  // Commit phases (transaction_commit.cc): commit() runs commit_attempt, then releases the session
  // whatever the outcome.
  void commit_attempt();
  void commit_read_only();
  engine::CommitRequest build_request();
  void check_size() const;
  // The values the watches saw (transaction_commit.cc); a watch whose value could not be read
  // (a retryable read error) is failed with that error instead of failing the commit.
  std::vector<std::optional<std::string>> watch_values();
  // The value watch i saw (throws what its read throws).
  std::optional<std::string> watch_value(std::size_t i);
  void register_watches(const std::vector<std::optional<std::string>>& seen, Version version);
  void fail_pending_watches(const Error& error);
  // Forgets the attempt's reads and writes (the watches must be settled first).
  void clear_attempt();

  std::shared_ptr<engine::Engine> engine_;
  std::shared_ptr<DatabaseCounters> counters_;
  TransactionOptions options_;
  std::chrono::steady_clock::time_point start_;
  int retries_ = 0;
  std::string last_retried_;  // what() of the error on_error last retried; "" after reset()

  std::unique_ptr<engine::Session> session_;
  bool has_read_version_ = false;
  WriteOverlay overlay_;
  ConflictRanges conflicts_;
  std::vector<engine::Mutation> mutations_;
  std::size_t size_ = 0;
  // The last kRecentGets keys store_get read, with their values (those of up to
  // kMaxRecentValueSize bytes: a copy of each is kept): a wait reads a key (and a few others) and
  // then watches it, and the watch's value at commit (watch_values) is that read's, not a second
  // request to the store (on etcd, a round trip).
  static constexpr std::size_t kRecentGets = 4;
  static constexpr std::size_t kMaxRecentValueSize = 1024;
  std::vector<std::pair<std::string, std::optional<std::string>>> recent_gets_;
  std::vector<PendingWatch> watches_;
  // What watch_values() learned of each watch: its value, a versionstamped value known only after
  // the commit, or a failed read (the watch failed).
  enum class WatchSeen { kValue, kStamped, kFailed };
  std::vector<WatchSeen> watch_seen_;

  State state_ = State::kOpen;
  Version committed_version_ = -1;
  std::string versionstamp_;
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_CLIENT_TRANSACTION_STATE_H_
