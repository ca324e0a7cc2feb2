// Internal: the conflict checker of the commit pipeline, after FoundationDB's resolver
// (ConflictBatch). It remembers, for every key, the version of the last committed write that
// covered it (a step function over the key space), and decides batches of transactions in commit
// order:
//   phase 1  too old:    read_version < floor()          -> kTooOld
//   phase 2  history:    a read range meets a write with version > read_version -> kConflict
//   phase 3  intra-batch: a read range meets a write of an earlier committed transaction of the
//                         same batch -> kConflict (the batch's writes enter the history at once,
//                         at the batch version, which is above every read version of the batch)
//   phase 4  record:     the writes of committed transactions enter the history at the version.
// A transaction that never read (read_version < 0) is only recorded.
//
// History below the floor is meaningless (no transaction reading there is accepted), so
// set_floor() turns it into "old" and merges adjacent old segments: the history holds only the
// writes newer than the floor, whatever the past (a queue churn that deletes millions of keys
// leaves a handful of segments).
//
// A check of [begin, end) against read version rv walks the step function inside the range, but
// gives up after a budget proportional to the number of writes recorded after rv and then scans
// those writes instead (kept in version order for the garbage collection anyway). So a check costs
// O(log n + min(segments inside the range, writes after rv)): a queue pop reading over many
// recently deleted keys stays cheap even while an old transaction holds the floor down.
//
// The newest writes (at most kMaxUnfolded) enter the step function lazily: a check scans them
// one by one, and only when more pile up are the oldest of them folded into the step function.
// Most writes fall below the floor before that (one client, or clients whose transactions are
// short), so they never cost a map insertion nor its garbage collection.
//
// Example:
//   ConflictChecker checker;
//   std::vector<CheckerTransaction> batch = {{read_version, &reads, &writes}};
//   std::vector<ConflictChecker::Outcome> out = checker.resolve(batch, commit_version);
//
// Thread safety: not thread-safe; the pipeline calls it from one thread at a time.
#ifndef KVQ_SRC_TXN_CONFLICT_CHECKER_H_
#define KVQ_SRC_TXN_CONFLICT_CHECKER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace kvq::pipeline {

// One transaction of a batch, as the checker sees it. The pointed-to vectors must outlive
// resolve(); the write ranges of a committed transaction are moved into the checker's history
// (their strings left empty), the transaction's request having no further use for them.
struct CheckerTransaction {
  Version read_version = -1;                                   // -1: the transaction never read
  const std::vector<engine::KeyRange>* read_ranges = nullptr;  // may be null (none)
  std::vector<engine::KeyRange>* write_ranges = nullptr;       // may be null (none)
};

class ConflictChecker {
 public:
  enum class Outcome { kCommitted, kConflict, kTooOld };

  ConflictChecker();

  // Decides `batch` in order, as if committed at `version`, and records the write ranges of the
  // committed ones at `version`. Requires version > every version passed before and > every
  // read_version in the batch. Empty ranges (begin >= end) are ignored. Returns one outcome per
  // transaction.
  std::vector<Outcome> resolve(std::span<const CheckerTransaction> batch, Version version);

  // Declares that no transaction with a read version below `floor` will be accepted any more
  // (they get kTooOld); history at or below it is merged away. Monotonic: lower values are ignored.
  void set_floor(Version floor);
  Version floor() const { return floor_; }

  // The number of segments of the step function and of writes not folded into it yet (for tests
  // of the garbage collection).
  std::size_t history_size() const { return steps_.size() + recorded_.size() - folded_; }
  // The newest version of a write that covered some key of [begin, end), or 0 if none newer than
  // the floor (for tests).
  Version max_write_version(const std::string& begin, const std::string& end) const;
  // Total step-function segments and log entries examined by checks so far (for tests of the
  // cost bound).
  std::uint64_t work() const { return work_; }

 private:
  struct Recorded {
    Version version;
    std::string begin;
    std::string end;
    bool overlaps(const std::string& b, const std::string& e) const { return begin < e && b < end; }
  };
  using RecordedIt = std::deque<Recorded>::const_iterator;

  // True if some key of [begin, end) was written after `read_version`.
  bool intersects_newer(const std::string& begin, const std::string& end, Version read_version);
  // True if one of the writes [from, to) overlaps [begin, end).
  bool scan_overlaps(RecordedIt from, RecordedIt to, const std::string& begin,
                     const std::string& end);
  // Folds recorded_[folded_, upto) into the step function.
  void fold(std::size_t upto);
  // Sets the step function to `version` on [begin, end).
  void record(const std::string& begin, const std::string& end, Version version);
  void collect_garbage();

  static constexpr std::size_t kMaxUnfolded = 32;

  // Step function: an entry (k, v) means keys in [k, next entry's key) were last written at v
  // (v <= floor_ means "old"). There is always an entry at "".
  std::map<std::string, Version, std::less<>> steps_;
  // Recorded writes newer than the floor, in version order: for incremental garbage collection
  // and for checks whose range holds more segments than there are writes after the read version.
  // The first folded_ of them are in steps_; the others are only here.
  std::deque<Recorded> recorded_;
  std::size_t folded_ = 0;
  Version floor_ = 0;
  std::uint64_t work_ = 0;
};

}  // namespace kvq::pipeline

#endif  // KVQ_SRC_TXN_CONFLICT_CHECKER_H_
