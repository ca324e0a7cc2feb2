// Internal (etcd engine): FoundationDB's MVCC window on etcd. A thread that, every window/4, notes
// the cluster's current revision and compacts etcd's history to the newest revision noted at
// least one window ago, so reads at older revisions fail with transaction_too_old. Compaction is
// cluster-wide. Runs only if the URL option mvcc_window_ms= is set.
//
// Example:
//   Compactor compactor(cluster);   // idle if options().mvcc_window is 0
//   compactor.start();  ...  compactor.stop();
#ifndef KVQ_SRC_ENGINE_ETCD_COMPACTOR_H_
#define KVQ_SRC_ENGINE_ETCD_COMPACTOR_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "engine/etcd/cluster.h"

namespace kvq::engine::etcd {

// The compaction thread of one engine. start/stop are called by the engine's owner thread.
class Compactor {
 public:
  explicit Compactor(std::shared_ptr<Cluster> cluster) : cluster_(std::move(cluster)) {}
  ~Compactor() { stop(); }
  Compactor(const Compactor&) = delete;
  Compactor& operator=(const Compactor&) = delete;

  // Starts the thread if options().mvcc_window > 0.
  void start();
  // Stops and joins the thread. Idempotent; never throws.
  void stop() noexcept;

 private:
  using Clock = std::chrono::steady_clock;

  void run();
  // One period: note the revision, compact what fell out of the window. Unreachable cluster:
  // nothing happens (the next period tries again).
  void step();

  std::shared_ptr<Cluster> cluster_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
  std::deque<std::pair<Clock::time_point, std::int64_t>> seen_;  // (when, revision) noted
  std::int64_t compacted_ = 0;
};

}  // namespace kvq::engine::etcd

#endif  // KVQ_SRC_ENGINE_ETCD_COMPACTOR_H_
