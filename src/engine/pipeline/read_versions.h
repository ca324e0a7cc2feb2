// Internal: the read versions of the commit pipeline and its MVCC floor. A session reads the store
// snapshot at the latest applied version and holds a pin on it; the floor is max(oldest pinned
// read version, newest version superseded more than the MVCC window ago). Reads and commits below
// the floor get transaction_too_old; the conflict history and the store are collected below it.
//
// Example:
//   ReadVersions rv(store->latest_version(), window_in_versions);
//   std::shared_ptr<Pin> pin = rv.current();          // a session pins the newest version
//   rv.check_read(pin->version);                       // throws transaction_too_old
//   Version floor = rv.advance(now);                   // the leader, before each batch
//   rv.publish(version);                               // the leader, after applying a batch
//
// Thread safety: current() and check_read() from any thread; advance() and publish() from one
// thread at a time (the leader of the write group).
#ifndef KVQ_SRC_ENGINE_PIPELINE_READ_VERSIONS_H_
#define KVQ_SRC_ENGINE_PIPELINE_READ_VERSIONS_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>

#include "kvq/database.h"

namespace kvq::pipeline {

// A read version in use: while a Pin is alive, its version is not garbage-collected (unless it
// falls out of the MVCC window).
struct Pin {
  explicit Pin(Version v) : version(v) {}
  const Version version;
};

class ReadVersions {
 public:
  // `base`: the store's recovered version; `window`: the MVCC window in versions (microseconds).
  ReadVersions(Version base, Version window);

  // The commit version clock: base + 1 + microseconds since construction.
  Version now() const;
  // The pin of the newest applied version.
  std::shared_ptr<Pin> current() const;
  // Throws transaction_too_old if `read_version` can no longer be read.
  void check_read(Version read_version) const;
  // Raises the floor to max(oldest live pin, newest version superseded more than the window
  // before `now`). Returns the new floor if it rose, else -1.
  Version advance(Version now);
  // Records `version` as applied: it becomes the current pin.
  void publish(Version version);
  // The floor (versions below it are unreadable).
  Version floor() const { return floor_.load(std::memory_order_acquire); }

  // transaction_too_old for `read_version`.
  static Error too_old(Version read_version);

 private:
  struct PinRecord {
    Version version;
    std::weak_ptr<Pin> pin;
  };

  const Version base_;
  const Version window_;
  const std::chrono::steady_clock::time_point start_;

  std::atomic<Version> floor_;
  std::atomic<Version> published_;  // the newest applied version
  mutable std::mutex current_mu_;
  std::shared_ptr<Pin> current_;
  mutable std::mutex pins_mu_;
  std::deque<PinRecord> pins_;  // one per applied version >= floor, in version order
};

}  // namespace kvq::pipeline

#endif  // KVQ_SRC_ENGINE_PIPELINE_READ_VERSIONS_H_
