#include "engine/pipeline/read_versions.h"

#include <string>

#include "common/clock.h"

namespace kvq::pipeline {

ReadVersions::ReadVersions(Version base, Version window)
    : base_(base),
      window_(window),
      start_(common::clock().steady_now()),
      floor_(base),
      published_(base),
      current_(std::make_shared<Pin>(base)) {
  pins_.push_back({base, current_});
}

Error ReadVersions::too_old(Version read_version) {
  return Error(ErrorCode::kTransactionTooOld,
               "read version " + std::to_string(read_version) + " is older than the MVCC window");
}

Version ReadVersions::now() const {
  auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(common::clock().steady_now() - start_)
          .count();
  return base_ + 1 + static_cast<Version>(us);
}

std::shared_ptr<Pin> ReadVersions::current() const {
  std::lock_guard<std::mutex> lock(current_mu_);
  return current_;
}

void ReadVersions::check_read(Version read_version) const {
  if (read_version < floor()) throw too_old(read_version);
  if (read_version >= published_.load(std::memory_order_acquire)) return;
  const Version t = now();
  if (t - read_version <= window_) return;
  // The read version is old; it is unusable once the version after it is older than the window.
  std::lock_guard<std::mutex> lock(pins_mu_);
  for (const PinRecord& r : pins_) {
    if (r.version > read_version) {
      if (r.version <= t - window_) throw too_old(read_version);
      return;
    }
  }
}

Version ReadVersions::advance(Version now) {
  Version floor;
  {
    std::lock_guard<std::mutex> lock(pins_mu_);
    const Version cut = now - window_;
    while (pins_.size() > 1 && (pins_[1].version <= cut || pins_[0].pin.expired())) {
      pins_.pop_front();
    }
    floor = pins_.front().version;
  }
  if (floor <= floor_.load(std::memory_order_relaxed)) return -1;
  floor_.store(floor, std::memory_order_release);
  return floor;
}

void ReadVersions::publish(Version version) {
  auto pin = std::make_shared<Pin>(version);
  {
    std::lock_guard<std::mutex> lock(pins_mu_);
    pins_.push_back({version, pin});
  }
  {
    std::lock_guard<std::mutex> lock(current_mu_);
    current_ = std::move(pin);
  }
  published_.store(version, std::memory_order_release);
}

}  // namespace kvq::pipeline
