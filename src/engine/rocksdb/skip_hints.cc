#include "engine/rocksdb/skip_hints.h"

#include <algorithm>

namespace kvq::engine::rocksdb_engine {

std::string SkipHints::forward_start(std::string_view begin, std::uint64_t sequence) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = forward_.find(begin);
  if (it == forward_.end() || it->second.sequence > sequence) return std::string(begin);
  return it->second.edge;
}

std::string SkipHints::reverse_start(std::string_view end, std::uint64_t sequence) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = reverse_.find(end);
  if (it == reverse_.end() || it->second.sequence > sequence) return std::string(end);
  return it->second.edge;
}

bool SkipHints::shrink_to_unwritten(std::string& lo, std::string& hi, bool keep_low,
                                    std::uint64_t sequence) const {
  if (sequence < log_floor_) return false;
  for (auto it = log_.rbegin(); it != log_.rend() && it->sequence > sequence; ++it) {
    if (!it->all_keys) return false;
    auto first = std::lower_bound(it->keys.begin(), it->keys.end(), lo);
    auto last = std::lower_bound(first, it->keys.end(), hi);
    if (first == last) continue;  // nothing put inside [lo, hi)
    if (keep_low) {
      hi = *first;  // [lo, first key put) stays empty
    } else {
      lo = *std::prev(last);  // [last key put + '\0', hi) stays empty
      lo.push_back('\0');
    }
    if (!(lo < hi)) return false;
  }
  return true;
}

void SkipHints::learn_forward(std::string_view begin, std::string_view first_live,
                              std::uint64_t sequence) {
  if (!(begin < first_live)) return;
  std::string lo(begin), hi(first_live);
  std::lock_guard<std::mutex> lock(mu_);
  if (!shrink_to_unwritten(lo, hi, /*keep_low=*/true, sequence)) return;
  if (forward_.size() >= kMaxHints && forward_.find(begin) == forward_.end()) forward_.clear();
  forward_.insert_or_assign(std::move(lo), Hint{std::move(hi), sequence});
}

void SkipHints::learn_reverse(std::string_view last_live_end, std::string_view end,
                              std::uint64_t sequence) {
  if (!(last_live_end < end)) return;
  std::string lo(last_live_end), hi(end);
  std::lock_guard<std::mutex> lock(mu_);
  if (!shrink_to_unwritten(lo, hi, /*keep_low=*/false, sequence)) return;
  if (reverse_.size() >= kMaxHints && reverse_.find(end) == reverse_.end()) reverse_.clear();
  reverse_.insert_or_assign(std::move(hi), Hint{std::move(lo), sequence});
}

void SkipHints::begin_write(const std::vector<std::string_view>& put_keys) {
  LoggedWrite entry{kPending, put_keys.size() <= kMaxLoggedKeys, {}};
  if (entry.all_keys) {
    entry.keys.assign(put_keys.begin(), put_keys.end());
    std::sort(entry.keys.begin(), entry.keys.end());
  }
  std::lock_guard<std::mutex> lock(mu_);
  log_keys_ += entry.keys.size();
  log_.push_back(std::move(entry));
  for (std::string_view key : put_keys) {
    // Forward hints cover [begin, edge): candidates have begin <= key. A put at `key` leaves
    // [begin, key) empty, so the hint shrinks to that (or goes if nothing is left).
    for (auto it = forward_.begin(); it != forward_.end() && it->first <= key;) {
      if (key < it->second.edge) {
        if (it->first == key) {
          it = forward_.erase(it);
          continue;
        }
        it->second.edge = std::string(key);
      }
      ++it;
    }
    // Reverse hints cover [edge, end): candidates have end > key. [key + '\0', end) stays empty.
    for (auto it = reverse_.upper_bound(key); it != reverse_.end(); ++it) {
      if (it->second.edge <= key) {
        it->second.edge = std::string(key);
        it->second.edge.push_back('\0');
      }
    }
  }
}

void SkipHints::end_write(std::uint64_t sequence) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!log_.empty() && log_.back().sequence == kPending) log_.back().sequence = sequence;
  while (log_.size() > 1 && (log_.size() > kLogWrites || log_keys_ > kMaxLogKeys)) {
    log_floor_ = std::max(log_floor_, log_.front().sequence);
    log_keys_ -= log_.front().keys.size();
    log_.pop_front();
  }
}

std::size_t SkipHints::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return forward_.size() + reverse_.size();
}

}  // namespace kvq::engine::rocksdb_engine
