// Internal: a transaction's own writes, as its reads see them (read-your-writes): per key the last
// set / clear / pending ADDs / versionstamped value, plus the coalesced ranges it cleared. It knows
// nothing of the store: reads merge it with the committed values (range_merge.h).
//
// Example:
//   WriteOverlay ov;
//   ov.set("a", "1");
//   ov.clear_range("b", "d");
//   const LocalWrite* w = ov.find("a");               // kSet "1"
//   ov.value_of(*w, std::nullopt, "a");               // "1"
//   ov.in_cleared("c");                               // true
//
// Thread safety: none (a transaction is used by one thread at a time).
#ifndef KVQ_SRC_CLIENT_WRITE_OVERLAY_H_
#define KVQ_SRC_CLIENT_WRITE_OVERLAY_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"

namespace kvq::detail {

enum class WriteKind { kSet, kClear, kAdd, kStampedValue };

// The transaction's own effect on one key.
struct LocalWrite {
  WriteKind kind = WriteKind::kSet;
  std::string value;                  // kSet: the value the transaction reads back;
                                      // kStampedValue: the value with its offset suffix
  std::vector<std::string> operands;  // kAdd, kStampedValue: ADDs applied after, in order
};

class WriteOverlay {
 public:
  using Writes = std::map<std::string, LocalWrite, std::less<>>;
  using Cleared = std::map<std::string, std::string, std::less<>>;  // coalesced [begin, end)

  // The local write of `key`, or null.
  const LocalWrite* find(std::string_view key) const;
  // Whether `key` lies in a range this transaction cleared (and did not write since).
  bool in_cleared(std::string_view key) const;
  bool empty() const { return writes_.empty() && cleared_.empty(); }

  void set(std::string_view key, std::string_view value);
  void clear(std::string_view key);
  void clear_range(std::string_view begin, std::string_view end);
  void add(std::string_view key, std::string_view operand);
  void set_stamped_value(std::string_view key, std::string_view value_with_offset);
  void reset();

  // The value the transaction sees for a key it wrote, given the committed value `stored`
  // (needed only for kAdd). Throws client_invalid_operation (accessed_unreadable) for a
  // versionstamped value.
  static std::optional<std::string> value_of(const LocalWrite& w,
                                             const std::optional<std::string>& stored,
                                             std::string_view key);
  // After a commit with `versionstamp`: the value set_stamped_value gave `key` (the stamp
  // spliced in, later ADDs applied). `key` must have a kStampedValue write.
  std::string committed_stamped_value(std::string_view key, const std::string& versionstamp) const;
  // The parts of [begin, end) whose reads do not depend on the committed value (sets, clears,
  // cleared ranges; not pending ADDs), merged and ascending.
  std::vector<engine::KeyRange> independent_ranges(std::string_view begin,
                                                   std::string_view end) const;

  const Writes& writes() const { return writes_; }
  const Cleared& cleared() const { return cleared_; }

 private:
  Writes writes_;
  Cleared cleared_;
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_CLIENT_WRITE_OVERLAY_H_
