// Internal: one get_range of a transaction: merges the committed pairs of the store with the
// transaction's own writes (write_overlay.h), fetching more from the store when local clears or
// writes hide what it returned, and stopping at the limit.
//
// Example:
//   std::vector<KeyValue> out;
//   RangeMerge merge(overlay, fetch, /*limit=*/10, &out);
//   merge.forward("a", "z");
//   if (merge.hit_limit()) ...  // the read conflict ends after out.back()
//
// Thread safety: none.
#ifndef KVQ_SRC_CLIENT_RANGE_MERGE_H_
#define KVQ_SRC_CLIENT_RANGE_MERGE_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "client/write_overlay.h"

namespace kvq::detail {

class RangeMerge {
 public:
  // Committed pairs of [begin, end) at the read version, at most `limit` (0 = all), ascending
  // (descending if `reverse`).
  using Fetch = std::function<std::vector<KeyValue>(std::string_view begin, std::string_view end,
                                                    int limit, bool reverse)>;

  // `limit` 0 means no limit. Appends to `out`.
  RangeMerge(const WriteOverlay& overlay, Fetch fetch, std::size_t limit,
             std::vector<KeyValue>* out)
      : overlay_(overlay), fetch_(std::move(fetch)), limit_(limit), out_(out) {}

  void forward(std::string_view begin, std::string_view end);
  void reverse(std::string_view begin, std::string_view end);
  // Whether the read stopped at the limit (so it saw only part of the range).
  bool hit_limit() const { return hit_limit_; }

 private:
  void emit(std::string key, std::string value);
  void emit_local(const std::string& key, const LocalWrite& w, std::optional<std::string> stored);
  // How many more pairs to fetch (0 = unlimited).
  int need() const;
  // Forward: [cursor, seg_end) is not cleared locally: store pairs merged with local writes.
  void merge_forward(std::string& cursor, const std::string& seg_end);
  // Reverse: [seg_begin, cursor) is not cleared locally.
  void merge_reverse(const std::string& seg_begin, std::string& cursor);

  const WriteOverlay& overlay_;
  Fetch fetch_;
  std::size_t limit_;
  std::vector<KeyValue>* out_;
  bool hit_limit_ = false;
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_CLIENT_RANGE_MERGE_H_
