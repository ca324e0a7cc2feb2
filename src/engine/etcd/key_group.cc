#include "engine/etcd/key_group.h"

#include <algorithm>

#include "common/bytes.h"

namespace kvq::engine::etcd {

std::optional<std::string> KeyGroup::value() const {
  std::optional<std::string> v;
  if (base) v = base->first;
  std::vector<const Delta*> in_order;
  for (const Delta& d : deltas) {
    if (live(d)) in_order.push_back(&d);
  }
  // Commit order; within one commit, the order of the ids (random prefix + sequence).
  std::sort(in_order.begin(), in_order.end(), [](const Delta* a, const Delta* b) {
    return a->mod != b->mod ? a->mod < b->mod : a->etcd_key < b->etcd_key;
  });
  for (const Delta* d : in_order) v = common::add_le(v, d->operand);
  return v;
}

std::vector<KeyGroup> group_records(
    const KeyCodec& codec, const google::protobuf::RepeatedPtrField<mvccpb::KeyValue>& kvs) {
  std::vector<KeyGroup> out;
  for (const mvccpb::KeyValue& kv : kvs) {
    std::optional<DecodedKey> d = codec.decode(kv.key());
    if (!d) continue;
    if (out.empty() || out.back().key != d->key) {
      out.push_back(KeyGroup{});
      out.back().key = std::move(d->key);
    }
    KeyGroup& g = out.back();
    if (d->delta) {
      g.deltas.push_back(Delta{kv.key(), kv.mod_revision(), kv.value()});
    } else {
      g.base.emplace(kv.value(), kv.mod_revision());
    }
  }
  return out;
}

}  // namespace kvq::engine::etcd
