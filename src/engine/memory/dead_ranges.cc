#include "engine/memory/dead_ranges.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "common/bytes.h"

namespace kvq::engine {

DeadRanges::Map::const_iterator DeadRanges::containing(std::string_view key) const {
  auto it = stretches_.upper_bound(key);
  if (it == stretches_.begin()) return stretches_.end();
  --it;
  return key < std::string_view(it->second.end) ? it : stretches_.end();
}

std::optional<DeadRanges::Hit> DeadRanges::skip(std::string_view key, Version version) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = containing(key);
  if (it == stretches_.end() || it->second.since > version) return std::nullopt;
  return Hit{it->first, it->second.end, it->second.since};
}

void DeadRanges::learn(std::string begin, std::string end, Version since) {
  if (!(begin < end)) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (stretches_.size() >= kMaxStretches) stretches_.clear();
  // Absorb every stretch overlapping or touching [begin, end): the union is dead from the
  // latest of their versions on.
  auto it = stretches_.upper_bound(begin);
  if (it != stretches_.begin() && std::prev(it)->second.end >= begin) --it;
  while (it != stretches_.end() && it->first <= end) {
    if (it->first < begin) begin = it->first;
    if (end < it->second.end) end = it->second.end;
    since = std::max(since, it->second.since);
    it = stretches_.erase(it);
  }
  stretches_.emplace(std::move(begin), Stretch{std::move(end), since});
}

void DeadRanges::written(std::string_view key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stretches_.empty()) return;
  auto it = containing(key);
  if (it == stretches_.end()) return;
  std::string begin = it->first;
  Stretch s = it->second;
  stretches_.erase(it);
  if (begin < key) stretches_.emplace(std::move(begin), Stretch{std::string(key), s.since});
  std::string after = common::key_after(key);
  if (after < s.end) stretches_.emplace(std::move(after), std::move(s));
}

std::size_t DeadRanges::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stretches_.size();
}

}  // namespace kvq::engine
