// Internal: small helpers on keys and values shared by the transaction, the pipeline and engines.
#ifndef KVQ_SRC_TXN_KEY_UTIL_H_
#define KVQ_SRC_TXN_KEY_UTIL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvq::txn {

// The first key after `key` in byte order: key + '\0'.
inline std::string key_after(std::string_view key) {
  std::string out;
  out.reserve(key.size() + 1);
  out.append(key);
  out.push_back('\0');
  return out;
}

// FoundationDB's ADD: `existing` (absent = zero) truncated or zero-extended to operand's length,
// plus `operand`, both little-endian unsigned integers; the result has operand's length (carry out
// of the last byte is dropped).
inline std::string atomic_add_bytes(const std::optional<std::string>& existing,
                                    std::string_view operand) {
  std::string out(operand.size(), '\0');
  unsigned carry = 0;
  for (std::size_t i = 0; i < operand.size(); ++i) {
    unsigned a =
        (existing && i < existing->size()) ? static_cast<unsigned char>((*existing)[i]) : 0;
    unsigned b = static_cast<unsigned char>(operand[i]);
    unsigned sum = a + b + carry;
    out[i] = static_cast<char>(sum & 0xff);
    carry = sum >> 8;
  }
  return out;
}

// 8 little-endian bytes of `v`.
inline std::string int64_le(std::int64_t v) {
  std::string out(8, '\0');
  auto u = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((u >> (8 * i)) & 0xff);
  return out;
}

// Reads a 4-byte little-endian unsigned integer at `p`.
inline std::uint32_t read_u32_le(std::string_view p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace kvq::txn

#endif  // KVQ_SRC_TXN_KEY_UTIL_H_
