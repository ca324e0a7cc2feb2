// Internal: the interface between the client-side Transaction (src/client/transaction.cc, which
// does read-your-writes, conflict-range bookkeeping, limits and retries) and an engine (the
// "cluster"). An engine never knows about queues; a layer never sees this header.
//
// Adding an engine = a folder under src/engine/, a class implementing Engine and Session, a URL
// scheme in src/open.cc, and the conformance suite (tests/conformance_test.cc) passing on it.
#ifndef KVQ_SRC_ENGINE_ENGINE_H_
#define KVQ_SRC_ENGINE_ENGINE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/database.h"
#include "kvq/subspace.h"

namespace kvq::detail {
class WatchState;
}

namespace kvq::engine {

// A half-open key range [begin, end): the public kvq::KeyRange.
using KeyRange = kvq::KeyRange;

enum class MutationType {
  kSet,                     // param1 = key, param2 = value
  kClear,                   // param1 = key
  kClearRange,              // param1 = begin, param2 = end
  kAddValue,                // param1 = key, param2 = little-endian operand (FDB ADD)
  kSetVersionstampedKey,    // param1 = key with 4-byte LE offset suffix, param2 = value
  kSetVersionstampedValue,  // param1 = key, param2 = value with 4-byte LE offset suffix
};

struct Mutation {
  MutationType type;
  std::string param1;
  std::string param2;
};

// What a transaction sends at commit, as FoundationDB's CommitTransactionRequest.
struct CommitRequest {
  // The version every read of the transaction was made at; -1 if it never read.
  Version read_version = -1;
  // Non-snapshot reads; commit must fail with not_committed iff one of these intersects a write
  // committed after read_version.
  std::vector<KeyRange> read_conflicts;
  // Ranges written (sets, clears, atomic ops, explicit write conflicts).
  std::vector<KeyRange> write_conflicts;
  // Mutations in the order the transaction made them; applied in that order at one version.
  std::vector<Mutation> mutations;
};

struct CommitResult {
  Version version = -1;      // the commit version
  std::string versionstamp;  // 10 bytes: version (8, big-endian) + order in batch (2, big-endian)
};

// The arguments of one Session::get_range call.
struct RangeQuery {
  std::string_view begin;
  std::string_view end;
  int limit = 0;
  bool reverse = false;
};

// One transaction's view of the engine: reads at one read version, then at most one commit.
// Used by one thread at a time. Errors are thrown as kvq::Error (transaction_too_old, ...).
class Session {
 public:
  virtual ~Session() = default;
  // The read version, taking one (the latest committed version) on first call.
  virtual Version read_version() = 0;
  // The committed value of `key` at read_version().
  virtual std::optional<std::string> get(std::string_view key) = 0;
  // Committed pairs in [begin, end) at read_version(), ascending (descending if `reverse`), at
  // most `limit` of them (0 = no limit).
  virtual std::vector<KeyValue> get_range(std::string_view begin, std::string_view end, int limit,
                                          bool reverse) = 0;
  // A hint that get_range will be called with each of `queries` soon (get(k), for a query of
  // exactly [k, key_after(k)) with no limit, forward): an engine with round trips may fetch them
  // all in one and answer those calls from what it fetched (the same results at the same read
  // version). Never changes a result; errors surface in the calls.
  // Default: nothing.
  virtual void prefetch(std::span<const RangeQuery> queries) { (void)queries; }
  // Tells the session that `key` has no value at this session's read version, taken or not yet
  // taken, unless this session read it (a key the caller made up with random bytes no one else
  // can make up): a read-conflict range over it at commit then needs no read of it (etcd reads each
  // part of a read-conflict range that no read covered, to pin its records). Never changes what
  // conflicts; the caller that is wrong about the key loses the conflicts a deletion of it would
  // have caused. Default: nothing.
  virtual void note_absent(std::string_view key) { (void)key; }
  // Commits `request` (whose read_version, if not -1, is this session's). Throws not_committed,
  // commit_unknown_result, transaction_too_old, ...
  virtual CommitResult commit(CommitRequest request) = 0;
  // How many of the engine's TransactionLimits::max_operations a commit with these read conflicts
  // (merged, as commit() receives them) and mutations would need. Engines without an operation
  // bound return 0.
  virtual std::size_t operations(const std::vector<KeyRange>& read_conflicts,
                                 const std::vector<Mutation>& mutations) {
    (void)read_conflicts;
    (void)mutations;
    return 0;
  }
};

class Engine {
 public:
  virtual ~Engine() = default;
  // A new session for one transaction attempt.
  virtual std::unique_ptr<Session> begin() = 0;
  // Arms `state` to fire once the value of `key` is no longer `value_seen` (nullopt = absent) as of
  // some version after `version`. Must fire at once if it already differs. The engine fails the
  // state (WatchState::fail) if it cannot keep watching.
  virtual void watch(std::string key, std::optional<std::string> value_seen, Version version,
                     std::shared_ptr<detail::WatchState> state) = 0;
  // Number of commit batches the engine has applied (group commit shows as batches < commits).
  virtual std::uint64_t commit_batches() const = 0;
  // What one transaction may hold on this engine. Default: FoundationDB's limits, no operation
  // bound.
  virtual TransactionLimits limits() const { return {}; }
  // Whether a commit may end in commit_unknown_result (a cluster, or a fault injector): then the
  // layers write an idempotency marker per operation (layers/contention/markers.h). Default: true.
  virtual bool commits_can_be_unknown() const { return true; }
  // Whether a read waits for a server (a round trip), so that Session::prefetch saves time: then
  // the layers hint their next reads (Transaction::prefetch). Default: false (reads are local).
  virtual bool reads_take_round_trips() const { return false; }
};

}  // namespace kvq::engine

#endif  // KVQ_SRC_ENGINE_ENGINE_H_
