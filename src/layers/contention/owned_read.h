// Internal: a range read that owns its keys, so a layer can build the reads it will make next,
// hand them to Transaction::prefetch together, and make them one by one afterwards (point_read:
// the read a get() makes).
#ifndef KVQ_SRC_LAYERS_CONTENTION_OWNED_READ_H_
#define KVQ_SRC_LAYERS_CONTENTION_OWNED_READ_H_

#include <span>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "kvq/database.h"

namespace kvq::contention {

struct OwnedRead {
  std::string begin, end;
  RangeOptions options;
  // The read, viewing this object's keys (valid while it lives and is not moved).
  RangeRead view() const { return {begin, end, options}; }
};

// The read of exactly `key`: as a Transaction::prefetch hint, it answers a later get(key).
inline OwnedRead point_read(std::string key) {
  std::string end = common::key_after(key);
  return {std::move(key), std::move(end), {}};
}

// Hands `reads` to tr.prefetch (the hint ends with the call: `reads` need not outlive it).
inline void prefetch(Transaction& tr, std::span<const OwnedRead> reads) {
  std::vector<RangeRead> views;
  views.reserve(reads.size());
  for (const OwnedRead& r : reads) views.push_back(r.view());
  tr.prefetch(views);
}

}  // namespace kvq::contention

#endif  // KVQ_SRC_LAYERS_CONTENTION_OWNED_READ_H_
