// kvq/subspace.h: a key prefix under which tuples are packed, as FoundationDB's Subspace.
//
// Example:
//   kvq::Subspace pq(kvq::Tuple().append("P"));
//   std::string key = pq.pack(kvq::Tuple().append(5).append(0));   // \x02P\x00 \x15\x05 \x14
//   kvq::Tuple t = pq.unpack(key);                                 // (5, 0)
//   kvq::KeyRange r = pq.range();                                  // every key of pq
//   kvq::Subspace p5 = pq[5];                                      // ("P", 5)
//
// Thread safety: a Subspace is an immutable value after construction; all const methods may be
// called concurrently.
#ifndef KVQ_SUBSPACE_H_
#define KVQ_SUBSPACE_H_

#include <string>
#include <string_view>

#include "kvq/tuple.h"

namespace kvq {

// A half-open key range [begin, end).
struct KeyRange {
  std::string begin;
  std::string end;
  friend bool operator==(const KeyRange&, const KeyRange&) = default;
};

class Subspace {
 public:
  // The empty prefix: the whole key space.
  Subspace() = default;
  // The prefix raw_prefix + prefix.pack(). Throws invalid_tuple if `prefix` holds an incomplete
  // versionstamp.
  explicit Subspace(const Tuple& prefix, std::string_view raw_prefix = {});
  // A subspace of just a raw byte prefix.
  static Subspace from_raw_prefix(std::string_view raw_prefix);

  // The prefix bytes.
  const std::string& key() const { return prefix_; }
  // prefix + t.pack(). Throws invalid_tuple if `t` holds an incomplete versionstamp.
  std::string pack(const Tuple& t = Tuple()) const;
  // For set_versionstamped_key: prefix + t.pack_with_versionstamp(), offset counting the prefix.
  // Throws invalid_tuple unless `t` holds exactly one incomplete versionstamp.
  std::string pack_with_versionstamp(const Tuple& t) const;
  // The tuple after the prefix. Throws key_outside_subspace if `key` does not start with the
  // prefix, invalid_tuple if the rest is not a valid tuple (offsets in the message count from the
  // end of the prefix).
  Tuple unpack(std::string_view key) const;
  // True if `key` starts with the prefix.
  bool contains(std::string_view key) const;
  // Every key strictly inside this subspace that packs a tuple starting with `t`:
  // [prefix + t.pack() + \x00, prefix + t.pack() + \xff), as FoundationDB's range().
  KeyRange range(const Tuple& t = Tuple()) const;
  // The subspace prefix + t.pack(). Throws as pack().
  Subspace subspace(const Tuple& t) const;
  // The subspace of one more element: sub[x] == sub.subspace(Tuple().append(x)).
  template <typename T>
  Subspace operator[](const T& element) const {
    return subspace(Tuple().append(element));
  }

  friend bool operator==(const Subspace&, const Subspace&) = default;

 private:
  std::string prefix_;
};

}  // namespace kvq

#endif  // KVQ_SUBSPACE_H_
