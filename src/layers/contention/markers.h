// Internal: the idempotency markers of one Queue or PriorityQueue object.
//
// A push or pop with its own retry loop writes a fresh marker key ("kvq", "mark", unix_ms, random)
// in its transaction; after commit_unknown_result the retry reads it to learn whether the earlier
// attempt committed (contention/run_once.h). Once the operation has returned, its marker is
// useless: it is remembered here as "finished" and cleared (blind clears, no conflicts) by a later
// operation of the same object, at most kClearPerWrite per operation, and by the destructor. So an
// object holds at most a few markers per thread using it, its memory does not grow, and a destroyed
// object leaves no marker behind. Markers of processes that died are swept by age (marker_ttl), now
// and then.
//
// On a database whose commits never end in commit_unknown_result (Database::
// commits_can_be_unknown(): memory:, rocksdb:) no marker is needed: make() returns an empty one,
// which write() and finished() skip (the age sweep still runs, for markers of earlier versions).
// Thread-safe.
#ifndef KVQ_SRC_LAYERS_CONTENTION_MARKERS_H_
#define KVQ_SRC_LAYERS_CONTENTION_MARKERS_H_

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kvq/database.h"
#include "kvq/subspace.h"

namespace kvq::detail {

class Markers {
 public:
  // Markers under `control` (subspace + ("kvq",)); those older than `ttl` are swept.
  Markers(std::shared_ptr<Database> db, const Subspace& control, std::chrono::milliseconds ttl);
  // Clears the finished markers still in the store, in one transaction (bounded in time). Best
  // effort: never throws; what it cannot clear is swept by age.
  ~Markers();
  Markers(const Markers&) = delete;
  Markers& operator=(const Markers&) = delete;

  // A fresh marker key, unique to one operation; empty if the database needs none.
  std::string make() const;
  // Finished markers one write() clears at most, unless told fewer: more than one, so the backlog
  // of many threads drains.
  static constexpr std::size_t kClearPerWrite = 16;
  // The `attempt` of a marker written only to fence off the attempts in doubt of an operation that
  // gives up (contention::run_once): no attempt's number.
  static constexpr std::size_t kFence = static_cast<std::size_t>(-1);
  // Writes `marker` in `tr` (unless empty) with the value `attempt` (which attempt of the
  // operation wrote it: written_by), with a read conflict on it: so of two attempts of one
  // operation at most one commits, and one that commits fences off an earlier one whose commit
  // is in doubt (it can no longer land). Clears up to `max_clears` finished markers (returned:
  // pass them to finished()), and once in 64 calls sweeps markers older than ttl: at most
  // max_clears + 3 operations.
  std::vector<std::string> write(Transaction& tr, const std::string& marker, std::size_t attempt,
                                 std::size_t max_clears = kClearPerWrite);
  // The operation of `marker` returned, after the commit that also cleared `cleared` (nothing to
  // do for an empty marker).
  void finished(const std::string& marker, const std::vector<std::string>& cleared);
  // Whether the operation of `marker` took effect: its marker is in the store as `tr` reads it
  // (false for an empty marker, whose operation's commit cannot have been in doubt).
  static bool found(Transaction& tr, const std::string& marker) {
    return !marker.empty() && tr.get(marker).has_value();
  }
  // Whether attempt `attempt` of the operation of `marker` took effect (write(tr, marker,
  // attempt) is in the store as `tr` reads it): another attempt's marker says no.
  static bool written_by(Transaction& tr, const std::string& marker, std::size_t attempt) {
    return !marker.empty() && tr.get(marker) == std::to_string(attempt);
  }
  // How many finished markers this object still has in the store (for tests).
  std::size_t pending() const;
  // How long an operation that gave up after commit_unknown_result may keep asking whether its
  // marker is there (contention::run_once's resolve_for): half the markers' lifetime, at most 30 s.
  std::chrono::milliseconds resolve_window() const {
    return std::min(ttl_ / 2, std::chrono::milliseconds(30'000));
  }

 private:
  std::shared_ptr<Database> db_;
  Subspace control_;
  std::string sweep_begin_;
  std::chrono::milliseconds ttl_;
  bool needed_;  // the database's commits can end in commit_unknown_result
  mutable std::mutex mu_;
  std::vector<std::string> pending_;  // finished markers not yet cleared
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_CONTENTION_MARKERS_H_
