#include "engine/etcd/collapse.h"

#include <utility>

#include "common/bytes.h"
#include "kvq/error.h"

namespace kvq::engine::etcd {
namespace {

// One pass over a transaction's mutations, keeping each key's net effect.
class Collapser {
 public:
  Collapser(std::string_view stamp, CollapseMode mode) : stamp_(stamp), mode_(mode) {
    if (stamp_.empty() && mode_ == CollapseMode::kShapeOnly) {
      stamp_ = std::string_view(kPlaceholderStamp, common::kVersionstampSize);
    }
  }

  void apply(const Mutation& m) {
    switch (m.type) {
      case MutationType::kSet:
        set(m.param1, value_of(m.param2));
        break;
      case MutationType::kClear:
        set(m.param1, std::nullopt);
        break;
      case MutationType::kClearRange:
        clear_range(m.param1, m.param2);
        break;
      case MutationType::kAddValue:
        add(m.param1, m.param2);
        break;
      case MutationType::kSetVersionstampedKey:
        needs_stamp_ = true;
        if (!stamp_.empty()) set(splice(m.param1), value_of(m.param2));
        break;
      case MutationType::kSetVersionstampedValue:
        needs_stamp_ = true;
        if (!stamp_.empty()) set(m.param1, mode_ == CollapseMode::kValues ? splice(m.param2) : "");
        break;
    }
  }

  Collapsed finish() &&;

 private:
  static constexpr char kPlaceholderStamp[] = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff";

  struct State {
    bool known = false;  // value below is the final value
    std::optional<std::string> value;
    std::vector<std::string> pending;  // add operands on the committed value (if !known)
  };

  std::string value_of(const std::string& value) const {
    return mode_ == CollapseMode::kValues ? value : std::string();
  }

  std::string splice(std::string_view with_offset) const {
    std::optional<std::string> out = common::splice_versionstamp(with_offset, stamp_);
    if (!out) {
      throw Error(ErrorCode::kClientInvalidOperation,
                  "etcd: versionstamp operand lacks its offset or its placeholder does not fit");
    }
    return std::move(*out);
  }

  bool covered(const std::string& key) const {
    for (const KeyRange& r : cleared_) {
      if (r.begin <= key && key < r.end) return true;
    }
    return false;
  }

  State& state_of(const std::string& key) {
    auto it = keys_.find(key);
    if (it != keys_.end()) return it->second;
    State s;
    s.known = covered(key);  // cleared earlier in this transaction: absent
    return keys_.emplace(key, std::move(s)).first->second;
  }

  void set(const std::string& key, std::optional<std::string> value) {
    State& s = state_of(key);
    s.known = true;
    s.value = std::move(value);
    s.pending.clear();
  }

  void clear_range(const std::string& begin, const std::string& end) {
    if (begin >= end) return;
    keys_.erase(keys_.lower_bound(begin), keys_.lower_bound(end));
    cleared_.push_back({begin, end});
  }

  void add(const std::string& key, const std::string& operand) {
    State& s = state_of(key);
    std::string op = mode_ == CollapseMode::kValues ? operand : std::string(operand.size(), '\0');
    if (s.known) {
      s.value = common::add_le(s.value, op);
    } else {
      s.pending.push_back(std::move(op));
    }
  }

  std::string_view stamp_;
  CollapseMode mode_;
  std::map<std::string, State> keys_;
  std::vector<KeyRange> cleared_;
  bool needs_stamp_ = false;
};

Collapsed Collapser::finish() && {
  Collapsed out;
  out.needs_stamp = needs_stamp_;
  out.cleared = common::merge_ranges(std::move(cleared_));
  for (auto& [key, s] : keys_) {
    if (s.known) {
      out.final_values.emplace(key, std::move(s.value));
      continue;
    }
    // Adds on an unknown value: runs of equal-length operands summed (addition modulo 2^(8n)
    // commutes; a length change truncates or extends, so order matters between runs).
    std::vector<std::string>& runs = out.deltas[key];
    for (std::string& operand : s.pending) {
      if (!runs.empty() && runs.back().size() == operand.size()) {
        runs.back() = common::add_le(runs.back(), operand);
      } else {
        runs.push_back(std::move(operand));
      }
    }
  }
  return out;
}

}  // namespace

Collapsed collapse(const std::vector<Mutation>& mutations, std::string_view stamp,
                   CollapseMode mode) {
  Collapser collapser(stamp, mode);
  for (const Mutation& m : mutations) collapser.apply(m);
  return std::move(collapser).finish();
}

}  // namespace kvq::engine::etcd
