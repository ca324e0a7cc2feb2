#include "client/write_overlay.h"

#include <iterator>

#include "common/bytes.h"

namespace kvq::detail {

using common::add_le;

const LocalWrite* WriteOverlay::find(std::string_view key) const {
  auto it = writes_.find(key);
  return it == writes_.end() ? nullptr : &it->second;
}

bool WriteOverlay::in_cleared(std::string_view key) const {
  auto it = cleared_.upper_bound(key);
  if (it == cleared_.begin()) return false;
  --it;
  return key < std::string_view(it->second);
}

void WriteOverlay::set(std::string_view key, std::string_view value) {
  LocalWrite& w = writes_[std::string(key)];
  w.kind = WriteKind::kSet;
  w.value.assign(value);
  w.operands.clear();
}

void WriteOverlay::clear(std::string_view key) {
  LocalWrite& w = writes_[std::string(key)];
  w.kind = WriteKind::kClear;
  w.value.clear();
  w.operands.clear();
}

void WriteOverlay::clear_range(std::string_view begin, std::string_view end) {
  writes_.erase(writes_.lower_bound(begin), writes_.lower_bound(end));
  std::string nb(begin);
  std::string ne(end);
  auto it = cleared_.upper_bound(nb);
  if (it != cleared_.begin() && std::prev(it)->second >= nb) {
    --it;
    nb = it->first;
  }
  while (it != cleared_.end() && it->first <= ne) {
    if (ne < it->second) ne = it->second;
    it = cleared_.erase(it);
  }
  cleared_.emplace(std::move(nb), std::move(ne));
}

void WriteOverlay::add(std::string_view key, std::string_view operand) {
  auto it = writes_.find(key);
  if (it == writes_.end()) {
    LocalWrite& w = writes_[std::string(key)];
    if (in_cleared(key)) {
      w.kind = WriteKind::kSet;
      w.value = add_le(std::nullopt, operand);
    } else {
      w.kind = WriteKind::kAdd;
      w.operands.emplace_back(operand);
    }
    return;
  }
  LocalWrite& w = it->second;
  switch (w.kind) {
    case WriteKind::kSet:
      w.value = add_le(w.value, operand);
      break;
    case WriteKind::kClear:
      w.kind = WriteKind::kSet;
      w.value = add_le(std::nullopt, operand);
      break;
    case WriteKind::kAdd:
    case WriteKind::kStampedValue:  // a stamped value stays unreadable until commit
      w.operands.emplace_back(operand);
      break;
  }
}

void WriteOverlay::set_stamped_value(std::string_view key, std::string_view value_with_offset) {
  LocalWrite& w = writes_[std::string(key)];
  w.kind = WriteKind::kStampedValue;
  w.value.assign(value_with_offset);
  w.operands.clear();
}

void WriteOverlay::reset() {
  writes_.clear();
  cleared_.clear();
}

std::optional<std::string> WriteOverlay::value_of(const LocalWrite& w,
                                                  const std::optional<std::string>& stored,
                                                  std::string_view key) {
  switch (w.kind) {
    case WriteKind::kSet:
      return w.value;
    case WriteKind::kClear:
      return std::nullopt;
    case WriteKind::kAdd: {
      std::optional<std::string> v = stored;
      for (const std::string& op : w.operands) v = add_le(v, op);
      return v;
    }
    case WriteKind::kStampedValue:
      break;
  }
  throw Error(ErrorCode::kClientInvalidOperation,
              "accessed_unreadable: key '" + std::string(key) +
                  "' has a versionstamped value set by this transaction");
}

std::string WriteOverlay::committed_stamped_value(std::string_view key,
                                                  const std::string& versionstamp) const {
  const LocalWrite& w = *find(key);
  const std::size_t size = w.value.size() - 4;  // validated when it was set
  std::string value = w.value.substr(0, size);
  value.replace(common::decode_le32(std::string_view(w.value).substr(size)), 10, versionstamp);
  for (const std::string& op : w.operands) value = add_le(value, op);
  return value;
}

std::vector<engine::KeyRange> WriteOverlay::independent_ranges(std::string_view begin,
                                                               std::string_view end) const {
  std::vector<engine::KeyRange> covered;
  auto c = cleared_.upper_bound(begin);
  if (c != cleared_.begin() && std::string_view(std::prev(c)->second) > begin) --c;
  for (; c != cleared_.end() && std::string_view(c->first) < end; ++c) {
    covered.push_back({c->first, c->second});
  }
  for (auto w = writes_.lower_bound(begin); w != writes_.end() && std::string_view(w->first) < end;
       ++w) {
    if (w->second.kind != WriteKind::kAdd)
      covered.push_back({w->first, common::key_after(w->first)});
  }
  return common::merge_ranges(std::move(covered));
}

}  // namespace kvq::detail
