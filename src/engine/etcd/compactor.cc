#include "engine/etcd/compactor.h"

#include <algorithm>

#include "kvq/error.h"

namespace kvq::engine::etcd {

namespace pb = ::etcdserverpb;

void Compactor::start() {
  if (cluster_->options().mvcc_window.count() <= 0) return;
  thread_ = std::thread([this] { run(); });
}

void Compactor::stop() noexcept {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Compactor::run() {
  const std::chrono::milliseconds window = cluster_->options().mvcc_window;
  const auto period = std::max(window / 4, std::chrono::milliseconds(5));
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, period, [&] { return stopping_; })) {
    lock.unlock();
    step();
    lock.lock();
  }
}

void Compactor::step() {
  try {
    pb::RangeRequest rr;
    rr.set_key(cluster_->codec().sequencer_key());
    rr.set_count_only(true);
    const std::int64_t revision = cluster_->range(rr, "compactor").header().revision();
    const auto now = Clock::now();
    seen_.emplace_back(now, revision);
    std::int64_t target = 0;
    while (!seen_.empty() && now - seen_.front().first >= cluster_->options().mvcc_window) {
      target = seen_.front().second;
      seen_.pop_front();
    }
    if (target <= compacted_) return;
    grpc::Status s = cluster_->compact_once(target);
    // "already compacted" (by someone else, further) is fine too.
    if (s.ok() || s.error_message().find("compacted") != std::string::npos) compacted_ = target;
  } catch (const Error&) {
    // Unreachable cluster: try again next period.
  }
}

}  // namespace kvq::engine::etcd
