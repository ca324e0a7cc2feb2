#include "engine/rocksdb/open_snapshots.h"

namespace kvq::engine::rocksdb_engine {

void OpenSnapshots::add(Version version, Member& m) {
  std::lock_guard<std::mutex> lock(mu_);
  m.entry_ = members_.emplace(version, &m);
  m.registered_ = true;
}

void OpenSnapshots::remove(Member& m) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!m.registered_) return;
  members_.erase(m.entry_);
  m.registered_ = false;
}

void OpenSnapshots::release_below(Version floor) {
  std::lock_guard<std::mutex> lock(mu_);
  while (!members_.empty() && members_.begin()->first < floor) {
    Member* m = members_.begin()->second;
    members_.erase(members_.begin());
    m->registered_ = false;
    m->release_early();
  }
}

}  // namespace kvq::engine::rocksdb_engine
