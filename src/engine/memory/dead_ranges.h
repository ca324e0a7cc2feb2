// Internal: low-water hints of the memory store, so a range read does not step over the keys that
// earlier pops deleted (a queue's front, while an old read version keeps their tombstones). A
// hint is a stretch [begin, end) of the key space with a version `since`: at every version
// >= since, no key in the stretch has a value. Range reads learn stretches from the dead keys they
// stepped over and jump over known ones; a set of a key inside a stretch splits it (clears and
// tombstones never make a stretch wrong). Stretches are disjoint.
//
// Example:
//   DeadRanges dead;
//   dead.learn("q/0", "q/9", /*since=*/70);        // a reader at >= 70 saw no value in [q/0, q/9)
//   auto hit = dead.skip("q/3", 80);   // [q/0, q/9): a reader at 80 may jump over it
//   dead.written("q/5");                             // [q/0, q/5) and [q/5\0, q/9) remain
//
// Thread safety: skip() and learn() from readers holding the store's shared lock (the internal
// mutex orders them); written() from the writer holding the store's exclusive lock.
#ifndef KVQ_SRC_ENGINE_MEMORY_DEAD_RANGES_H_
#define KVQ_SRC_ENGINE_MEMORY_DEAD_RANGES_H_

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "kvq/database.h"

namespace kvq::engine {

class DeadRanges {
 public:
  // The most stretches kept; learning more forgets them all (they are only hints).
  static constexpr std::size_t kMaxStretches = 4096;

  // If `key` lies in a stretch usable at `version` (since <= version): the stretch; else
  // nullopt.
  struct Hit {
    std::string begin;
    std::string end;
    Version since;
  };
  std::optional<Hit> skip(std::string_view key, Version version) const;
  // Records that no key in [begin, end) has a value at any version >= since (as of the latest
  // applied version; later sets call written()). Merges with overlapping stretches.
  void learn(std::string begin, std::string end, Version since);
  // A value was set for `key`: the stretch holding it is split around it.
  void written(std::string_view key);
  std::size_t size() const;

 private:
  struct Stretch {
    std::string end;
    Version since;
  };
  using Map = std::map<std::string, Stretch, std::less<>>;
  // The stretch containing `key`, or end().
  Map::const_iterator containing(std::string_view key) const;

  mutable std::mutex mu_;
  Map stretches_;  // by begin
};

}  // namespace kvq::engine

#endif  // KVQ_SRC_ENGINE_MEMORY_DEAD_RANGES_H_
