#include "engine/pipeline/conflict_checker.h"

#include <algorithm>
#include <iterator>

namespace kvq::pipeline {

ConflictChecker::ConflictChecker() { steps_.emplace(std::string(), 0); }

std::vector<ConflictChecker::Outcome> ConflictChecker::resolve(
    std::span<const CheckerTransaction> batch, Version version) {
  std::vector<Outcome> out(batch.size(), Outcome::kCommitted);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const CheckerTransaction& tr = batch[i];
    const bool has_reads = tr.read_ranges != nullptr && !tr.read_ranges->empty();
    if (tr.read_version >= 0) {
      // As FoundationDB's resolver: a read version below the floor makes a transaction too old
      // only if it has reads to check; one that read only as snapshot (or not at all) commits.
      if (tr.read_version < floor_ && has_reads) {
        out[i] = Outcome::kTooOld;
        continue;
      }
      if (has_reads) {
        bool conflict = false;
        for (const engine::KeyRange& r : *tr.read_ranges) {
          if (r.begin < r.end && intersects_newer(r.begin, r.end, tr.read_version)) {
            conflict = true;
            break;
          }
        }
        if (conflict) {
          out[i] = Outcome::kConflict;
          continue;
        }
      }
    }
    // Committed: its writes are visible to the later transactions of this batch right away,
    // because `version` is above all of their read versions.
    if (tr.write_ranges != nullptr) {
      for (engine::KeyRange& w : *tr.write_ranges) {
        if (w.begin < w.end) recorded_.push_back({version, std::move(w.begin), std::move(w.end)});
      }
    }
  }
  if (recorded_.size() - folded_ > kMaxUnfolded) fold(recorded_.size() - kMaxUnfolded / 2);
  return out;
}

bool ConflictChecker::intersects_newer(const std::string& begin, const std::string& end,
                                       Version read_version) {
  // Writes recorded after read_version: the suffix of recorded_ (versions never decrease).
  auto first_newer = std::upper_bound(recorded_.begin(), recorded_.end(), read_version,
                                      [](Version v, const Recorded& r) { return v < r.version; });
  const auto unfolded = recorded_.begin() + static_cast<std::ptrdiff_t>(folded_);
  // The newest writes are not in the step function yet: scan them.
  if (scan_overlaps(std::max(first_newer, unfolded), recorded_.end(), begin, end)) return true;
  if (first_newer >= unfolded) return false;
  // The older ones are: walk the step function, within a budget.
  const auto newer_folded = static_cast<std::size_t>(unfolded - first_newer);
  std::size_t budget = 16 + 2 * newer_folded;
  auto it = std::prev(steps_.upper_bound(begin));
  for (; it != steps_.end() && it->first < end; ++it) {
    ++work_;
    if (it->second > read_version) return true;
    if (--budget == 0) break;
  }
  if (budget != 0) return false;
  // Too many segments: scan those writes instead.
  return scan_overlaps(first_newer, unfolded, begin, end);
}

bool ConflictChecker::scan_overlaps(RecordedIt from, RecordedIt to, const std::string& begin,
                                    const std::string& end) {
  for (auto r = from; r != to; ++r) {
    ++work_;
    if (r->overlaps(begin, end)) return true;
  }
  return false;
}

Version ConflictChecker::max_write_version(const std::string& begin, const std::string& end) const {
  Version best = 0;
  auto it = std::prev(steps_.upper_bound(begin));
  for (; it != steps_.end() && it->first < end; ++it) {
    if (it->second > floor_) best = std::max(best, it->second);
  }
  for (auto r = recorded_.begin() + static_cast<std::ptrdiff_t>(folded_); r != recorded_.end();
       ++r) {
    if (r->overlaps(begin, end)) best = std::max(best, r->version);
  }
  return best;
}

void ConflictChecker::fold(std::size_t upto) {
  for (; folded_ < upto; ++folded_) {
    const Recorded& r = recorded_[folded_];
    record(r.begin, r.end, r.version);
  }
}

void ConflictChecker::record(const std::string& begin, const std::string& end, Version version) {
  // The value the step function has at `end`, to restore after the overwritten segment.
  auto at_end = std::prev(steps_.upper_bound(end));
  const bool end_exists = at_end->first == end;
  const Version end_version = at_end->second;
  auto lo = steps_.lower_bound(begin);
  auto hi = end_exists ? at_end : std::next(at_end);
  // Entries in [begin, end) are replaced by one entry at begin.
  hi = steps_.erase(lo, hi);
  if (!end_exists) hi = steps_.emplace_hint(hi, end, end_version);
  // hi now points at the entry for `end`; everything in [begin, end) is gone. Insert `begin`
  // unless the segment before it already has this version (then it simply extends).
  if (hi == steps_.begin() || std::prev(hi)->second != version) {
    steps_.emplace_hint(hi, begin, version);
  }
  // Merge the end entry if it continues the same version.
  if (hi->second == version) steps_.erase(hi);
}

void ConflictChecker::set_floor(Version floor) {
  if (floor <= floor_) return;
  floor_ = floor;
  collect_garbage();
}

void ConflictChecker::collect_garbage() {
  while (!recorded_.empty() && recorded_.front().version <= floor_) {
    if (folded_ == 0) {  // never entered the step function (nor did any later write)
      recorded_.pop_front();
      continue;
    }
    --folded_;
    auto it = steps_.find(recorded_.front().begin);
    recorded_.pop_front();
    if (it == steps_.end() || it->second > floor_) continue;  // merged or rewritten since
    it->second = 0;
    // Merge with old neighbours on both sides.
    if (it != steps_.begin() && std::prev(it)->second <= floor_) {
      it = std::prev(steps_.erase(it));
      it->second = 0;
    }
    auto next = std::next(it);
    while (next != steps_.end() && next->second <= floor_) next = steps_.erase(next);
  }
}

}  // namespace kvq::pipeline
