#include "client/conflict_ranges.h"

#include <algorithm>
#include <utility>

#include "common/bytes.h"

namespace kvq::detail {

std::size_t ConflictRanges::add_read(std::string begin, std::string end) {
  const std::size_t bytes = begin.size() + end.size();
  reads_.push_back({std::move(begin), std::move(end)});
  return bytes;
}

std::size_t ConflictRanges::add_read(const WriteOverlay& overlay, std::string begin,
                                     std::string end) {
  if (overlay.empty()) return add_read(std::move(begin), std::move(end));
  std::size_t bytes = 0;
  std::string cur = std::move(begin);
  for (engine::KeyRange& r : overlay.independent_ranges(cur, end)) {
    if (cur < r.begin) bytes += add_read(cur, std::min(r.begin, end));
    if (cur < r.end) cur = std::move(r.end);
    if (!(cur < end)) return bytes;
  }
  if (cur < end) bytes += add_read(std::move(cur), std::move(end));
  return bytes;
}

std::size_t ConflictRanges::add_write(std::string begin, std::string end) {
  const std::size_t bytes = begin.size() + end.size();
  writes_.push_back({std::move(begin), std::move(end)});
  return bytes;
}

std::vector<engine::KeyRange> ConflictRanges::merged_reads() const {
  return common::merge_ranges(reads_);
}

std::vector<engine::KeyRange> ConflictRanges::take_reads() {
  std::vector<engine::KeyRange> out = common::merge_ranges(std::move(reads_));
  reads_.clear();
  return out;
}

std::vector<engine::KeyRange> ConflictRanges::take_writes() {
  std::vector<engine::KeyRange> out = common::merge_ranges(std::move(writes_));
  writes_.clear();
  return out;
}

void ConflictRanges::reset() {
  reads_.clear();
  writes_.clear();
}

}  // namespace kvq::detail
