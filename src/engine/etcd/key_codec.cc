#include "engine/etcd/key_codec.h"

#include "common/random.h"

namespace kvq::engine::etcd {

std::string KeyCodec::encode(std::string_view key) const {
  std::string out(prefix_);
  out.reserve(prefix_.size() + key.size() + 2);
  for (char c : key) {
    out.push_back(c);
    if (c == '\0') out.push_back('\xff');
  }
  out.push_back('\0');
  out.push_back('\0');
  return out;
}

std::string KeyCodec::group_end(std::string encoded) {
  encoded.back() = '\x01';  // enc(k) ends 0x00 0x00; every delta of k is enc(k) + id
  return encoded;
}

std::optional<DecodedKey> KeyCodec::decode(std::string_view etcd_key) const {
  if (etcd_key.substr(0, prefix_.size()) != prefix_) return std::nullopt;
  const std::string_view s = etcd_key.substr(prefix_.size());
  DecodedKey out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\0') {
      out.key.push_back(s[i]);
      continue;
    }
    if (i + 1 >= s.size()) return std::nullopt;
    if (s[i + 1] == '\xff') {
      out.key.push_back('\0');
      ++i;
      continue;
    }
    if (s[i + 1] != '\0') return std::nullopt;
    const std::size_t rest = s.size() - (i + 2);
    if (rest != 0 && rest != kDeltaIdSize) return std::nullopt;
    out.delta = rest == kDeltaIdSize;
    return out;
  }
  return std::nullopt;
}

std::string random_delta_id() { return common::random_bytes(KeyCodec::kDeltaIdSize); }

}  // namespace kvq::engine::etcd
