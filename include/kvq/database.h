// kvq/database.h: one transactional ordered key-value API with FoundationDB's semantics, over
// several engines ("memory:", "rocksdb:/path", "etcd://host:port,...").
//
// Semantics (exactly FoundationDB's; docs/transactions.md has the long form):
//  - A transaction reads at one read version (a consistent snapshot, taken at its first read) plus
//    its own buffered writes (read-your-writes, also for ranges, clears and atomic ops).
//  - Every non-snapshot read adds a read-conflict range. A range read that stops at its limit adds
//    only [begin, key_after(last key returned)) (reverse: [last key returned, end)). Snapshot reads
//    add none. Writes add write-conflict ranges.
//  - commit() fails with not_committed (1020) iff a read-conflict range intersects a write
//  committed
//    after the read version. Blind writes never conflict.
//  - Read versions older than the engine's MVCC window (default 5 s) give transaction_too_old
//  (1007).
//  - Limits: key 10,000 bytes, value 100,000 bytes, transaction 10,000,000 bytes (keys + values +
//    conflict ranges); past them key_too_large / value_too_large / transaction_too_large and
//    nothing is applied.
//
// Example:
//   auto db = kvq::open("memory:");
//   db->run([](kvq::Transaction& tr) { tr.set("hello", "world"); });
//   std::optional<std::string> v =
//       db->run([](kvq::Transaction& tr) { return tr.get("hello"); });
//
// Thread safety: a Database may be shared by any number of threads. A Transaction must be used by
// one thread at a time.
#ifndef KVQ_DATABASE_H_
#define KVQ_DATABASE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kvq/error.h"

namespace kvq {

namespace engine {
class Engine;
class Session;
}  // namespace engine
namespace detail {
class WatchState;
class TransactionState;
class TransactionAccess;
struct DatabaseCounters;
}  // namespace detail

// A commit version. Increases with every commit batch; comparable across transactions of one
// database.
using Version = std::int64_t;

// FoundationDB's limits.
inline constexpr std::size_t kMaxKeySize = 10'000;
inline constexpr std::size_t kMaxValueSize = 100'000;
inline constexpr std::size_t kMaxTransactionSize = 10'000'000;

// What one transaction may hold on a database's engine (Database::limits()). A commit over either
// bound fails with transaction_too_large and changes nothing. Layers that batch work into one
// transaction (high-contention fulfilment, batches) fill it up to these bounds, measured with
// Transaction::usage().
struct TransactionLimits {
  // Bytes of keys, values and conflict ranges, as Transaction::approximate_size() counts them.
  // Default: kMaxTransactionSize; on etcd also below the server's --max-request-bytes.
  std::size_t max_bytes = kMaxTransactionSize;
  // Engine operations one commit may need: on etcd what the server counts against its
  // --max-txn-ops in the commit's Txn (compares and writes; docs/engines.md, etcd, Limits).
  // Default: no bound (the embedded engines).
  std::size_t max_operations = std::numeric_limits<std::size_t>::max();
};

// What committing a transaction now would use of its database's TransactionLimits.
struct TransactionUsage {
  std::size_t bytes = 0;       // approximate_size()
  std::size_t operations = 0;  // engine operations (0 on engines without an operation bound)
  std::size_t mutations = 0;   // sets, clears and atomic operations made, one each
};

// One key and its value, as returned by range reads.
struct KeyValue {
  std::string key;
  std::string value;
  friend bool operator==(const KeyValue&, const KeyValue&) = default;
};

// Options of Transaction::get_range.
struct RangeOptions {
  // Maximum number of pairs to return; 0 means no limit.
  int limit = 0;
  // Return pairs in descending key order (the last `limit` keys of the range).
  bool reverse = false;
  // A snapshot read: adds no read-conflict range.
  bool snapshot = false;
};

// One read of Transaction::get_ranges: the arguments of a get_range call.
struct RangeRead {
  std::string_view begin;
  std::string_view end;
  RangeOptions options;
};

// Per-transaction options; they survive on_error() retries and are cleared by reset().
struct TransactionOptions {
  // Abort with transaction_timed_out (1031) once this much time has passed since the transaction
  // was created (or reset); 0 means no timeout. Default: none.
  std::chrono::milliseconds timeout{0};
  // on_error() rethrows instead of retrying once this many retries have been made; -1 means no
  // limit. Default: -1.
  int retry_limit = -1;
  // Upper bound of the exponential back-off on_error() sleeps (jittered). Default: 1 s.
  std::chrono::milliseconds max_retry_delay{1000};
};

// Something to wait on that fires after a key's value changes. Returned by Transaction::watch.
// Cheap to copy (copies share one state); safe to use from any thread. As in FoundationDB, when
// the last copy is gone the watch is cancelled, so the engine frees what it holds for it (on etcd
// a stream and a thread).
class Watch {
 public:
  Watch() = default;  // An empty watch: wait_for() throws client_invalid_operation.

  // Blocks until the watch fires (returns true) or `timeout` passes (returns false). Throws the
  // watch's error if it failed: the commit's error if its transaction's commit failed (as
  // FoundationDB: not_committed, commit_unknown_result, ...), transaction_cancelled if the
  // transaction was reset, retried or destroyed before committing, operation_cancelled after
  // cancel(), connection_failed if the engine lost its server.
  bool wait_for(std::chrono::milliseconds timeout) const;
  // Blocks until the watch fires; throws as wait_for().
  void wait() const;
  // True once the watch has fired or failed (wait_for would not block).
  bool ready() const;
  // Stops the watch: waiters get operation_cancelled. Idempotent.
  void cancel();
  // Blocks until one of `watches` fires or fails, or `timeout` passes. Returns true if one fired;
  // throws the error of one that failed (as wait_for), client_invalid_operation for an empty
  // watch. The watches are left as they are (cancel the others if no longer needed).
  static bool wait_any(std::span<const Watch> watches, std::chrono::milliseconds timeout);

  // A watch of `state`, cancelled when its last copy is gone.
  explicit Watch(std::shared_ptr<detail::WatchState> state);

 private:
  // Shares ownership with the copies' handle, whose destruction cancels the watch.
  std::shared_ptr<detail::WatchState> state_;
};

// A transaction: reads at one version, buffers writes, commits them atomically or not at all.
// Create with Database::create_transaction(), or let Database::run() manage one. Not thread-safe.
class Transaction {
 public:
  Transaction(Transaction&&) noexcept;
  Transaction& operator=(Transaction&&) noexcept;
  ~Transaction();  // An uncommitted transaction is discarded; its watches fail.

  // The value of `key`, or nullopt if absent. Adds a read-conflict on `key` unless `snapshot`.
  // Throws key_too_large for keys over kMaxKeySize, client_invalid_operation for a key this
  // transaction gave a versionstamped value (its value is unknown until commit, as
  // FoundationDB's accessed_unreadable), and engine errors (transaction_too_old, ...).
  std::optional<std::string> get(std::string_view key, bool snapshot = false);

  // The pairs with begin <= key < end in key order (descending if options.reverse), at most
  // options.limit of them. Adds the read-conflict range described in the file comment unless
  // options.snapshot. Throws inverted_range if begin > end, client_invalid_operation if the range
  // holds a key this transaction gave a versionstamped value (as get).
  std::vector<KeyValue> get_range(std::string_view begin, std::string_view end,
                                  RangeOptions options = {});
  // Several get_range calls at once: result i is what get_range(reads[i]...) would return, with
  // the same read conflicts and errors, as if they were called in order. An engine with round
  // trips (etcd) fetches them in one request where it can, so a layer that knows the ranges it
  // needs pays one round trip instead of one per range.
  std::vector<std::vector<KeyValue>> get_ranges(std::span<const RangeRead> reads);
  // A hint that get_range will soon be called with each of `reads` (options.snapshot aside), when
  // a layer knows its next reads before it can make them (each depends on what the one before it
  // returned): an engine with round trips (etcd) fetches them all now in one request, and answers
  // each of those calls (the first with exactly that range, limit and direction) from what it
  // fetched. A read of the one key k (begin k, end k + '\0', no limit, forward) also answers
  // get(k), so gets can be hinted beside ranges. Results, read conflicts and errors stay those of
  // the calls; a read never made costs only memory until the transaction ends. Adds no read
  // conflict. Other engines: nothing.
  void prefetch(std::span<const RangeRead> reads);

  // Buffers key = value. Throws key_too_large / value_too_large / transaction_too_large; on a
  // throw nothing is buffered.
  void set(std::string_view key, std::string_view value);
  // Buffers the removal of `key` (absent keys are fine).
  void clear(std::string_view key);
  // Buffers the removal of every key in [begin, end). Throws inverted_range if begin > end.
  void clear_range(std::string_view begin, std::string_view end);
  // FoundationDB's ADD: at commit, key = little-endian sum of its current value and `operand`
  // (both read as little-endian integers of operand's length, an absent value as zero; the current
  // value is truncated or zero-extended to that length). Adds no read conflict. Reads of `key`
  // in this transaction see the result.
  void atomic_add(std::string_view key, std::string_view operand);
  // Convenience: atomic_add with `delta` as 8 little-endian bytes.
  void atomic_add(std::string_view key, std::int64_t delta);

  // FoundationDB's SET_VERSIONSTAMPED_KEY: `key_with_offset` ends with a 4-byte little-endian
  // offset of a 10-byte placeholder inside the key, which is replaced at commit by the commit's
  // versionstamp (8-byte big-endian version + 2-byte big-endian order within the batch), so stamps
  // are unique and increase with commit order. Tuple::pack_with_versionstamp builds such keys.
  // Reads in this transaction do not see the key. Throws client_invalid_operation for a bad offset.
  void set_versionstamped_key(std::string_view key_with_offset, std::string_view value);
  // FoundationDB's SET_VERSIONSTAMPED_VALUE: as above, with the placeholder in the value.
  void set_versionstamped_value(std::string_view key, std::string_view value_with_offset);

  // Adds read/write conflict ranges explicitly, as FoundationDB's add_conflict_range.
  void add_read_conflict_range(std::string_view begin, std::string_view end);
  void add_read_conflict_key(std::string_view key);
  void add_write_conflict_range(std::string_view begin, std::string_view end);
  void add_write_conflict_key(std::string_view key);

  // The read version, taking one from the engine if no read happened yet.
  Version get_read_version();

  // A watch that fires after `key`'s value differs from the value this transaction saw (its read
  // version plus its own writes). It becomes active when the transaction commits; if the
  // transaction is reset or destroyed without committing, the watch fails with
  // transaction_cancelled. Adds no read conflict.
  Watch watch(std::string_view key);

  // Commits the buffered writes atomically. Throws not_committed on conflict, and any engine error;
  // after a throw pass the error to on_error(). A transaction without writes commits trivially
  // (checking nothing). After success the transaction must be reset() before reuse.
  void commit();
  // The commit version of a successful commit that wrote something; throws no_commit_version for
  // read-only commits, client_invalid_operation before commit.
  Version get_committed_version() const;
  // The 10-byte versionstamp of the successful commit (the bytes set_versionstamped_* wrote).
  std::string get_versionstamp() const;

  // If `error` is retryable and the retry limit and timeout allow, sleeps an exponential, jittered
  // back-off (1 ms doubling up to max_retry_delay) and resets the transaction for a retry (options
  // kept). Otherwise rethrows `error`. Throws transaction_timed_out if the timeout expired.
  void on_error(const Error& error);
  // Discards all reads, writes and the read version; clears options.
  void reset();

  // Sets the options (see TransactionOptions). Throws invalid_option_value for negative values
  // and for durations over 2,147,483,647 ms (FoundationDB's range).
  void set_options(const TransactionOptions& options);
  const TransactionOptions& options() const;

  // Bytes this transaction would send at commit (keys, values, conflict ranges).
  std::size_t approximate_size() const;
  // Whether it has written anything (a set, clear, atomic op or write-conflict range) since it
  // began or was reset. A commit without writes checks nothing and never reaches the engine, so it
  // cannot fail (nor end in commit_unknown_result).
  bool has_writes() const;
  // What committing now would use, to compare with the database's limits(). May take a read
  // version (no conflict). Cost: linear in the transaction's reads and writes.
  TransactionUsage usage();

  explicit Transaction(std::unique_ptr<detail::TransactionState> state);

 private:
  friend class detail::TransactionAccess;  // kvq's own layers (src/client/transaction_access.h)
  std::unique_ptr<detail::TransactionState> state_;
};

// Statistics a Database keeps about what passed through it. All counters are monotonic.
struct DatabaseStats {
  std::uint64_t commits = 0;         // successful commits that wrote something
  std::uint64_t conflicts = 0;       // commits refused with not_committed
  std::uint64_t retries = 0;         // on_error() retries (by any transaction of this Database)
  std::uint64_t commit_batches = 0;  // engine commit batches (group commits)
};

// A handle to one database. Create with kvq::open(). Thread-safe.
class Database : public std::enable_shared_from_this<Database> {
 public:
  // A database over `engine`; url() returns `url` (kvq::open passes the URL it was given).
  explicit Database(std::shared_ptr<engine::Engine> engine, std::string url = "");
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // A new transaction with `options`. Throws invalid_option_value as Transaction::set_options.
  Transaction create_transaction(const TransactionOptions& options = {});

  // FoundationDB's retry loop (the seeds' @fdb.transactional): creates a transaction, calls
  // fn(tr), commits, and on an error calls tr.on_error(e), which retries retryable errors and
  // rethrows the rest. Returns fn's result (fn may return void). fn may run more than once, so it
  // must not have effects outside the transaction that cannot be repeated.
  template <typename Fn>
  auto run(Fn&& fn, const TransactionOptions& options = {})
      -> std::invoke_result_t<Fn&, Transaction&> {
    using R = std::invoke_result_t<Fn&, Transaction&>;
    Transaction tr = create_transaction(options);
    for (;;) {
      try {
        if constexpr (std::is_void_v<R>) {
          fn(tr);
          tr.commit();
          return;
        } else {
          R result = fn(tr);
          tr.commit();
          return result;
        }
      } catch (const Error& e) {
        tr.on_error(e);
      }
    }
  }

  // The URL this database was opened with (from kvq::open: with a password in it shown as
  // "***", e.g. "etcds://root:***@host:2379").
  const std::string& url() const;
  // A copy of the counters.
  DatabaseStats stats() const;
  // What one transaction may hold on this database's engine.
  TransactionLimits limits() const;
  // Whether a commit on this database may fail with commit_unknown_result: true on etcd and with
  // fault injection, false on memory: and rocksdb: (a commit there is applied or it fails, never
  // in doubt). Code that must be idempotent under unknown results needs its own care only if true.
  bool commits_can_be_unknown() const;
  // Whether each read waits for a server (etcd): then Transaction::prefetch and get_ranges save
  // round trips, and a layer gives its hints. False on memory: and rocksdb: (reads are local: a
  // hint would only cost the CPU of building it).
  bool reads_take_round_trips() const;

  // For engines and tests: the engine behind this database.
  const std::shared_ptr<engine::Engine>& engine() const { return engine_; }

 private:
  std::shared_ptr<engine::Engine> engine_;
  std::string url_;
  std::shared_ptr<detail::DatabaseCounters> counters_;  // shared with its transactions
};

// Opens a database by URL:
//   "memory:"                        embedded, in-process, in memory (lost at exit)
//   "rocksdb:/path/to/dir"           embedded, durable (RocksDB), created if missing
//   "etcd://host:port[,host:port]"   a real etcd v3 cluster
//   "etcds://[user:password@]host:port[,host:port]"   the same over TLS, with authentication
// Options may follow as a query string, e.g. "memory:?mvcc_window_ms=5000" (see docs/engines.md).
// Throws connection_string_invalid for a malformed URL or unknown scheme, and engine errors
// (database_in_use, io_error, connection_failed, authentication_failed). No error message holds
// the URL's password.
std::shared_ptr<Database> open(std::string_view url);

}  // namespace kvq

#endif  // KVQ_DATABASE_H_
