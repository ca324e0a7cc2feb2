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
  for (auto it = members_.begin(); it != members_.end() && it->first < floor;) {
    Member* m = it->second;
    if (!m->try_release()) {
      ++it;
      continue;
    }
    it = members_.erase(it);
    m->registered_ = false;
  }
}

}  // namespace kvq::engine::rocksdb_engine
