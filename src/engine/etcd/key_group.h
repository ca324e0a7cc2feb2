// Internal (etcd engine): the records of one kvq key as read from etcd (its base record and its
// delta records, see key_codec.h) and the value they stand for.
//
// Example:
//   for (const KeyGroup& g : group_records(codec, response.kvs())) use(g.key, g.value());
#ifndef KVQ_SRC_ENGINE_ETCD_KEY_GROUP_H_
#define KVQ_SRC_ENGINE_ETCD_KEY_GROUP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/etcd/key_codec.h"
#include "kv.pb.h"

namespace kvq::engine::etcd {

// One delta record: an operand to add to the key's value, written at revision `mod`.
struct Delta {
  std::string etcd_key;
  std::int64_t mod = 0;
  std::string operand;
};

// The base and delta records of one kvq key.
struct KeyGroup {
  std::string key;
  std::optional<std::pair<std::string, std::int64_t>> base;  // value, mod_revision
  std::vector<Delta> deltas;

  // True if `d` counts: written after the base (a set hides older deltas).
  bool live(const Delta& d) const { return !base || d.mod > base->second; }
  // The kvq value: the base (absent = none), plus the live deltas in commit order (within one
  // commit, in the order of their ids).
  std::optional<std::string> value() const;
};

// Groups etcd key-values (ascending or descending, as read) into kvq keys, in the order met;
// records `codec` did not write are skipped.
std::vector<KeyGroup> group_records(
    const KeyCodec& codec, const google::protobuf::RepeatedPtrField<mvccpb::KeyValue>& kvs);

}  // namespace kvq::engine::etcd

#endif  // KVQ_SRC_ENGINE_ETCD_KEY_GROUP_H_
