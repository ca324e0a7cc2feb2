// Internal: a transaction's conflict bookkeeping, as FoundationDB's client keeps it: the read
// ranges its non-snapshot reads covered (minus what it wrote itself) and the ranges it wrote.
// Commit sends both merged.
//
// Example:
//   ConflictRanges c;
//   c.add_read(overlay, "a", "b");   // returns the bytes it added
//   c.add_write("a", "a\0");
//   engine::CommitRequest r; r.read_conflicts = c.take_reads(); ...
//
// Thread safety: none.
#ifndef KVQ_SRC_CLIENT_CONFLICT_RANGES_H_
#define KVQ_SRC_CLIENT_CONFLICT_RANGES_H_

#include <cstddef>
#include <string>
#include <vector>

#include "client/write_overlay.h"
#include "engine/engine.h"

namespace kvq::detail {

class ConflictRanges {
 public:
  // Adds the read range [begin, end) as is. Returns the bytes it added.
  std::size_t add_read(std::string begin, std::string end);
  // Adds [begin, end) minus the parts `overlay` wrote independently of the committed value
  // (sets, clears, cleared ranges), as FoundationDB's RYW does: reading what you wrote yourself
  // does not depend on anyone else. Keys with pending ADDs still conflict. Returns the bytes
  // added.
  std::size_t add_read(const WriteOverlay& overlay, std::string begin, std::string end);
  // Adds the write range [begin, end). Returns the bytes it added.
  std::size_t add_write(std::string begin, std::string end);

  bool has_reads() const { return !reads_.empty(); }
  bool has_writes() const { return !writes_.empty(); }
  // The read ranges, merged (a copy; for usage()).
  std::vector<engine::KeyRange> merged_reads() const;
  // Moves the ranges out, merged.
  std::vector<engine::KeyRange> take_reads();
  std::vector<engine::KeyRange> take_writes();
  void reset();

 private:
  std::vector<engine::KeyRange> reads_;
  std::vector<engine::KeyRange> writes_;
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_CLIENT_CONFLICT_RANGES_H_
