#include "engine/rocksdb/skip_hints.h"

#include <algorithm>

namespace kvq::engine::rocksdb_engine {

std::vector<KeyStretch> SkipHints::empty_stretches(std::string_view begin, std::string_view end,
                                                   std::uint64_t sequence, bool reverse,
                                                   std::size_t max) const {
  std::vector<KeyStretch> out;
  auto add = [&](std::string_view lo, std::string_view hi) {
    if (out.size() < max) out.push_back({std::string(lo), std::string(hi)});
  };
  // Adds the parts of a stretch (cut to [begin, end)) known empty at `sequence`, in read order.
  auto add_known = [&](const auto& entry) {
    const std::string_view lo = std::max<std::string_view>(entry.first, begin);
    const std::string_view hi = std::min<std::string_view>(entry.second.hi, end);
    if (entry.second.sequence <= sequence) return add(lo, hi);
    std::vector<KeyStretch> parts = empty_at(lo, hi, sequence);
    if (reverse) std::reverse(parts.begin(), parts.end());
    for (const KeyStretch& part : parts) add(part.lo, part.hi);
  };
  std::lock_guard<std::mutex> lock(mu_);
  if (reverse) {
    // Stretches are disjoint, so their ends ascend with their starts.
    for (auto it = stretches_.lower_bound(end); it != stretches_.begin() && out.size() < max;) {
      --it;
      if (it->second.hi <= begin) break;
      add_known(*it);
    }
    return out;
  }
  auto it = stretches_.upper_bound(begin);
  if (it != stretches_.begin() && std::prev(it)->second.hi > begin) --it;
  for (; it != stretches_.end() && it->first < end && out.size() < max; ++it) add_known(*it);
  return out;
}

std::vector<KeyStretch> SkipHints::empty_at(std::string_view lo, std::string_view hi,
                                            std::uint64_t sequence) const {
  if (sequence < log_floor_) return {};
  std::vector<KeyStretch> cleared;  // since `sequence`, inside [lo, hi)
  std::size_t writes = 0;
  for (auto it = log_.rbegin(); it != log_.rend() && it->sequence > sequence; ++it) {
    if (!it->all_keys || ++writes > kMaxStaleWrites) return {};
    for (const KeyStretch& c : it->cleared) {
      if (c.lo < hi && lo < c.hi) cleared.push_back(c);
    }
  }
  std::sort(cleared.begin(), cleared.end(),
            [](const KeyStretch& a, const KeyStretch& b) { return a.lo < b.lo; });
  std::vector<KeyStretch> out;
  std::string from(lo);
  for (KeyStretch& c : cleared) {
    if (from < c.lo) out.push_back({from, c.lo});
    from = std::max(from, c.hi);
  }
  if (from < hi) out.push_back({std::move(from), std::string(hi)});
  return out;
}

bool SkipHints::keys_put_since(std::string_view lo, std::string_view hi, std::uint64_t sequence,
                               std::vector<std::string>& keys) const {
  if (sequence < log_floor_) return false;
  for (auto it = log_.rbegin(); it != log_.rend() && it->sequence > sequence; ++it) {
    if (!it->all_keys) return false;
    auto first = std::lower_bound(it->keys.begin(), it->keys.end(), lo);
    auto last = std::lower_bound(first, it->keys.end(), hi);
    keys.insert(keys.end(), first, last);
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return true;
}

void SkipHints::insert_merged(std::string lo, std::string hi, std::uint64_t sequence) {
  auto it = stretches_.upper_bound(lo);
  if (it != stretches_.begin()) {
    auto before = std::prev(it);
    if (before->second.hi >= hi) return;  // known already
    if (before->second.hi >= lo) it = before;
  }
  for (; it != stretches_.end() && it->first <= hi; it = stretches_.erase(it)) {
    lo = std::min(lo, it->first);
    hi = std::max(hi, it->second.hi);
    sequence = std::max(sequence, it->second.sequence);
  }
  if (stretches_.size() >= kMaxStretches) stretches_.clear();
  stretches_.emplace(std::move(lo), Stretch{std::move(hi), sequence});
}

void SkipHints::learn(std::string_view lo, std::string_view hi, std::uint64_t sequence) {
  if (!(lo < hi)) return;
  std::vector<std::string> put;
  std::lock_guard<std::mutex> lock(mu_);
  if (!keys_put_since(lo, hi, sequence, put)) return;
  // Every piece between the keys put since `sequence` is still empty.
  std::string piece_lo(lo);
  for (std::string& key : put) {
    if (piece_lo < key) insert_merged(piece_lo, key, sequence);
    piece_lo = std::move(key);
    piece_lo.push_back('\0');
  }
  if (piece_lo < hi) insert_merged(std::move(piece_lo), std::string(hi), sequence);
}

void SkipHints::split_at(std::string_view key) {
  auto it = stretches_.upper_bound(key);
  if (it == stretches_.begin()) return;
  --it;
  if (!(key < it->second.hi)) return;
  Stretch above = it->second;
  if (it->first == key) {
    stretches_.erase(it);
  } else {
    it->second.hi = std::string(key);
  }
  std::string above_lo(key);
  above_lo.push_back('\0');
  if (above_lo < above.hi) stretches_.emplace(std::move(above_lo), std::move(above));
}

void SkipHints::begin_write(const std::vector<std::string_view>& put_keys,
                            std::vector<KeyStretch> cleared) {
  LoggedWrite entry{kPending, put_keys.size() + cleared.size() <= kMaxLoggedKeys, {}, {}};
  if (entry.all_keys) {
    entry.keys.assign(put_keys.begin(), put_keys.end());
    std::sort(entry.keys.begin(), entry.keys.end());
    entry.cleared = std::move(cleared);
  }
  std::lock_guard<std::mutex> lock(mu_);
  log_keys_ += entry.keys.size() + entry.cleared.size();
  log_.push_back(std::move(entry));
  for (std::string_view key : put_keys) split_at(key);
}

void SkipHints::end_write(std::uint64_t sequence) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!log_.empty() && log_.back().sequence == kPending) log_.back().sequence = sequence;
  while (log_.size() > 1 && (log_.size() > kLogWrites || log_keys_ > kMaxLogKeys)) {
    log_floor_ = std::max(log_floor_, log_.front().sequence);
    log_keys_ -= log_.front().keys.size() + log_.front().cleared.size();
    log_.pop_front();
  }
}

std::size_t SkipHints::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stretches_.size();
}

}  // namespace kvq::engine::rocksdb_engine
