#include "engine/rocksdb/skip_hints.h"

#include <algorithm>
#include <optional>

namespace kvq::engine::rocksdb_engine {

std::vector<KeyStretch> SkipHints::empty_stretches(std::string_view begin, std::string_view end,
                                                   std::uint64_t sequence, bool reverse,
                                                   std::size_t max) const {
  std::vector<KeyStretch> out;
  std::lock_guard<std::mutex> lock(mu_);
  // What the writes since `sequence` cleared, read from the log once, at the first stretch
  // learnt after `sequence` (nullopt: the log cannot say).
  bool looked_up = false;
  std::optional<std::vector<KeyStretch>> cleared;
  // Adds the parts of a stretch (cut to [begin, end)) known empty at `sequence`, in read order.
  auto add_known = [&](const auto& entry) {
    const std::string_view lo = std::max<std::string_view>(entry.first, begin);
    const std::string_view hi = std::min<std::string_view>(entry.second.hi, end);
    if (entry.second.sequence <= sequence) return out.push_back({std::string(lo), std::string(hi)});
    if (!looked_up) cleared = cleared_since(begin, end, sequence);
    looked_up = true;
    if (!cleared) return;
    std::vector<KeyStretch> parts = without(lo, hi, *cleared);
    if (reverse) std::reverse(parts.begin(), parts.end());
    for (KeyStretch& part : parts) {
      if (out.size() < max) out.push_back(std::move(part));
    }
  };
  // Visits a bounded number of stretches even if few of them hold at `sequence`.
  std::size_t visits = 4 * max;
  if (reverse) {
    // Stretches are disjoint, so their ends ascend with their starts.
    for (auto it = stretches_.lower_bound(end);
         it != stretches_.begin() && out.size() < max && visits-- > 0;) {
      --it;
      if (it->second.hi <= begin) break;
      add_known(*it);
    }
    return out;
  }
  auto it = stretches_.upper_bound(begin);
  if (it != stretches_.begin() && std::prev(it)->second.hi > begin) --it;
  for (; it != stretches_.end() && it->first < end && out.size() < max && visits-- > 0; ++it) {
    add_known(*it);
  }
  return out;
}

template <typename Visit>
bool SkipHints::visit_writes_since(std::uint64_t sequence, std::size_t max_writes,
                                   Visit visit) const {
  if (sequence < log_floor_) return false;
  std::size_t writes = 0;
  for (auto it = log_.rbegin(); it != log_.rend() && it->sequence > sequence; ++it) {
    if (!it->all_keys || ++writes > max_writes) return false;
    visit(*it);
  }
  return true;
}

std::optional<std::vector<KeyStretch>> SkipHints::cleared_since(std::string_view begin,
                                                                std::string_view end,
                                                                std::uint64_t sequence) const {
  std::vector<KeyStretch> cleared;
  const bool known = visit_writes_since(sequence, kMaxStaleWrites, [&](const LoggedWrite& w) {
    for (const KeyStretch& c : w.cleared) {
      if (c.lo < end && begin < c.hi) cleared.push_back(c);
    }
  });
  if (!known) return std::nullopt;
  std::sort(cleared.begin(), cleared.end(),
            [](const KeyStretch& a, const KeyStretch& b) { return a.lo < b.lo; });
  std::vector<KeyStretch> joined;
  for (KeyStretch& c : cleared) {
    if (!joined.empty() && c.lo <= joined.back().hi) {
      joined.back().hi = std::max(joined.back().hi, c.hi);
    } else {
      joined.push_back(std::move(c));
    }
  }
  return joined;
}

std::vector<KeyStretch> SkipHints::without(std::string_view lo, std::string_view hi,
                                           const std::vector<KeyStretch>& cleared) {
  std::vector<KeyStretch> out;
  std::string from(lo);
  // The first cleared range ending after `lo` (they are disjoint: their ends ascend too).
  auto c = std::upper_bound(cleared.begin(), cleared.end(), lo,
                            [](std::string_view key, const KeyStretch& r) { return key < r.hi; });
  for (; c != cleared.end() && c->lo < hi; ++c) {
    if (from < c->lo) out.push_back({from, c->lo});
    from = std::max(from, c->hi);
  }
  if (from < hi) out.push_back({std::move(from), std::string(hi)});
  return out;
}

bool SkipHints::keys_put_since(std::string_view lo, std::string_view hi, std::uint64_t sequence,
                               std::vector<std::string>& keys) const {
  const bool known = visit_writes_since(sequence, log_.size(), [&](const LoggedWrite& w) {
    auto first = std::lower_bound(w.keys.begin(), w.keys.end(), lo);
    keys.insert(keys.end(), first, std::lower_bound(first, w.keys.end(), hi));
  });
  if (!known) return false;
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
  LoggedWrite entry{kPending, put_keys.size() + cleared.size() <= kMaxLoggedKeys, {}, {}, 0};
  if (entry.all_keys) {
    entry.keys.assign(put_keys.begin(), put_keys.end());
    std::sort(entry.keys.begin(), entry.keys.end());
    entry.cleared = std::move(cleared);
    for (const std::string& key : entry.keys) entry.bytes += key.size();
    for (const KeyStretch& c : entry.cleared) entry.bytes += c.lo.size() + c.hi.size();
  }
  std::lock_guard<std::mutex> lock(mu_);
  log_bytes_ += entry.bytes;
  log_.push_back(std::move(entry));
  for (std::string_view key : put_keys) split_at(key);
}

void SkipHints::end_write(std::uint64_t sequence) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!log_.empty() && log_.back().sequence == kPending) log_.back().sequence = sequence;
  while (log_.size() > 1 && (log_.size() > kLogWrites || log_bytes_ > kMaxLogBytes)) {
    log_floor_ = std::max(log_floor_, log_.front().sequence);
    log_bytes_ -= log_.front().bytes;
    log_.pop_front();
  }
}

std::size_t SkipHints::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stretches_.size();
}

}  // namespace kvq::engine::rocksdb_engine
