// Internal (etcd engine): where kvq keys live in etcd's key space.
//
// A kvq key k is stored at  prefix + enc(k), where enc escapes 0x00 as 0x00 0xff and appends the
// terminator 0x00 0x00 (order-preserving and prefix-free, as FDB's tuple byte strings), so kvq
// range [b, e) is etcd range [prefix + enc(b), prefix + enc(e)) and the empty key is legal.
// Atomic adds whose base value the transaction does not know are written blind as delta records
// prefix + enc(k) + 16 random bytes  holding the operand (key_group.h sums them), so a key's
// base and deltas form one contiguous etcd range [encode(k), group_end(encode(k))). Two keys of
// kvq's own live outside every kvq range: the versionstamp sequencer and the commit marker.
//
// Example:
//   KeyCodec codec("app/");
//   codec.encode(std::string("a\0b", 3)) == std::string("app/a\0\xff" "b\0\0", 10);
#ifndef KVQ_SRC_ENGINE_ETCD_KEY_CODEC_H_
#define KVQ_SRC_ENGINE_ETCD_KEY_CODEC_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace kvq::engine::etcd {

// A kvq key recovered from an etcd key, and whether the etcd key was one of its delta records.
struct DecodedKey {
  std::string key;
  bool delta = false;
};

// Maps kvq keys to etcd keys under one prefix. Immutable, so thread-safe.
class KeyCodec {
 public:
  // Bytes of the random id that ends a delta record's key.
  static constexpr std::size_t kDeltaIdSize = 16;

  explicit KeyCodec(std::string prefix) : prefix_(std::move(prefix)) {}

  const std::string& prefix() const { return prefix_; }
  // The etcd key of `key`'s base record; also the etcd bound of a kvq range bound `key`.
  std::string encode(std::string_view key) const;
  // The end of the group (base + deltas) of the key whose base record is `encoded`.
  static std::string group_end(std::string encoded);
  // Inverse of encode (delta records included); nullopt for etcd keys kvq did not write this way
  // under this prefix.
  std::optional<DecodedKey> decode(std::string_view etcd_key) const;
  // The versionstamp sequencer (not an encoded key, so no kvq range ever contains it).
  std::string sequencer_key() const { return prefix_ + "\xff\xff\xff\xff/versionstamp"; }
  // Written by commits that would otherwise change nothing, so every commit gets its own revision.
  std::string commit_marker_key() const { return prefix_ + "\xff\xff\xff\xff/commit"; }

 private:
  std::string prefix_;
};

// KeyCodec::kDeltaIdSize random bytes: the id of a new delta record.
std::string random_delta_id();

}  // namespace kvq::engine::etcd

#endif  // KVQ_SRC_ENGINE_ETCD_KEY_CODEC_H_
