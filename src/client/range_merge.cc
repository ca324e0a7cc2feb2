#include "client/range_merge.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "common/bytes.h"

namespace kvq::detail {

void RangeMerge::emit(std::string key, std::string value) {
  out_->push_back({std::move(key), std::move(value)});
  if (limit_ > 0 && out_->size() >= limit_) hit_limit_ = true;
}

void RangeMerge::emit_local(const std::string& key, const LocalWrite& w,
                            std::optional<std::string> stored) {
  std::optional<std::string> v = WriteOverlay::value_of(w, stored, key);
  if (v) emit(key, std::move(*v));
}

int RangeMerge::need() const { return limit_ > 0 ? static_cast<int>(limit_ - out_->size()) : 0; }

void RangeMerge::forward(std::string_view begin, std::string_view end) {
  const auto& writes = overlay_.writes();
  const auto& cleared = overlay_.cleared();
  std::string cursor(begin);
  while (!hit_limit_ && std::string_view(cursor) < end) {
    auto c = cleared.upper_bound(cursor);
    if (c != cleared.begin() && std::prev(c)->second > cursor) {
      // [cursor, seg_end) is cleared locally: only local writes after the clear show.
      std::string seg_end = std::min(std::prev(c)->second, std::string(end));
      for (auto it = writes.lower_bound(cursor);
           !hit_limit_ && it != writes.end() && it->first < seg_end; ++it) {
        emit_local(it->first, it->second, std::nullopt);
      }
      cursor = std::move(seg_end);
      continue;
    }
    std::string seg_end(
        c != cleared.end() && std::string_view(c->first) < end ? std::string_view(c->first) : end);
    merge_forward(cursor, seg_end);
  }
}

void RangeMerge::merge_forward(std::string& cursor, const std::string& seg_end) {
  const auto& writes = overlay_.writes();
  while (!hit_limit_ && cursor < seg_end) {
    const int n = need();
    std::vector<KeyValue> fetched = fetch_(cursor, seg_end, n, false);
    const bool complete = n == 0 || fetched.size() < static_cast<std::size_t>(n);
    std::string upto = complete ? seg_end : common::key_after(fetched.back().key);
    auto w = writes.lower_bound(cursor);
    std::size_t f = 0;
    while (!hit_limit_) {
      const bool has_w = w != writes.end() && w->first < upto;
      const bool has_f = f < fetched.size();
      if (!has_w && !has_f) break;
      if (has_w && (!has_f || w->first <= fetched[f].key)) {
        std::optional<std::string> stored;
        if (has_f && w->first == fetched[f].key) stored = std::move(fetched[f++].value);
        emit_local(w->first, w->second, std::move(stored));
        ++w;
      } else {
        emit(std::move(fetched[f].key), std::move(fetched[f].value));
        ++f;
      }
    }
    cursor = std::move(upto);
  }
}

void RangeMerge::reverse(std::string_view begin, std::string_view end) {
  const auto& writes = overlay_.writes();
  const auto& cleared = overlay_.cleared();
  std::string cursor(end);  // exclusive upper bound of what is left
  while (!hit_limit_ && begin < std::string_view(cursor)) {
    auto c = cleared.lower_bound(cursor);
    const bool has_c = c != cleared.begin();
    if (has_c) --c;
    if (has_c && c->second >= cursor) {
      // [seg_begin, cursor) is cleared locally: only local writes after the clear show.
      std::string seg_begin = std::max(c->first, std::string(begin));
      auto it = writes.lower_bound(cursor);
      while (!hit_limit_ && it != writes.begin() && std::prev(it)->first >= seg_begin) {
        --it;
        emit_local(it->first, it->second, std::nullopt);
      }
      cursor = std::move(seg_begin);
      continue;
    }
    std::string seg_begin(has_c && begin < std::string_view(c->second) ? std::string_view(c->second)
                                                                       : begin);
    merge_reverse(seg_begin, cursor);
  }
}

void RangeMerge::merge_reverse(const std::string& seg_begin, std::string& cursor) {
  const auto& writes = overlay_.writes();
  while (!hit_limit_ && seg_begin < cursor) {
    const int n = need();
    std::vector<KeyValue> fetched = fetch_(seg_begin, cursor, n, true);
    const bool complete = n == 0 || fetched.size() < static_cast<std::size_t>(n);
    std::string lower = complete ? seg_begin : fetched.back().key;
    auto w = writes.lower_bound(cursor);  // one past the next local write
    std::size_t f = 0;
    while (!hit_limit_) {
      const bool has_w = w != writes.begin() && std::prev(w)->first >= lower;
      const bool has_f = f < fetched.size();
      if (!has_w && !has_f) break;
      if (has_w && (!has_f || std::prev(w)->first >= fetched[f].key)) {
        --w;
        std::optional<std::string> stored;
        if (has_f && w->first == fetched[f].key) stored = std::move(fetched[f++].value);
        emit_local(w->first, w->second, std::move(stored));
      } else {
        emit(std::move(fetched[f].key), std::move(fetched[f].value));
        ++f;
      }
    }
    cursor = std::move(lower);
  }
}

}  // namespace kvq::detail
