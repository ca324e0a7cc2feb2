// Internal: byte helpers every layer below the public API shares: fixed-width integer coding,
// FoundationDB's ADD on byte strings, versionstamp placeholders, and key ranges.
//
// Example:
//   std::string v = kvq::common::encode_le64(-1);      // "\xff" x 8
//   kvq::common::decode_le64(v) == -1;
//   kvq::common::key_after("a") == std::string("a\0", 2);
#ifndef KVQ_SRC_COMMON_BYTES_H_
#define KVQ_SRC_COMMON_BYTES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/subspace.h"  // kvq::KeyRange

namespace kvq::common {

// The first key after `key` in byte order: key + '\0'.
std::string key_after(std::string_view key);

// 8 little-endian bytes of `v` (two's complement).
std::string encode_le64(std::int64_t v);
// The little-endian integer in the first min(8, size) bytes of `bytes` (missing bytes are zero).
std::int64_t decode_le64(std::string_view bytes);
// 8 big-endian bytes of `v`: byte order equals numeric order.
std::string encode_be64(std::uint64_t v);
// The big-endian integer in the first min(8, size) bytes of `bytes`.
std::uint64_t decode_be64(std::string_view bytes);
// 4 little-endian bytes of `v`.
std::string encode_le32(std::uint32_t v);
// The 4-byte little-endian unsigned integer at the start of `bytes` (size >= 4).
std::uint32_t decode_le32(std::string_view bytes);

// FoundationDB's ADD: `existing` (absent = zero) truncated or zero-extended to operand's length,
// plus `operand`, both little-endian unsigned integers; the result has operand's length (a carry
// out of the last byte is dropped).
std::string add_le(const std::optional<std::string>& existing, std::string_view operand);

// The size of a versionstamp: 8-byte big-endian version + 2-byte big-endian order in the batch.
inline constexpr std::size_t kVersionstampSize = 10;

// For a SET_VERSIONSTAMPED_* parameter (bytes ending in a 4-byte little-endian offset of a
// 10-byte placeholder): the parameter without its offset, with the placeholder replaced by
// `stamp`. nullopt if the parameter is shorter than 4 bytes or the placeholder does not fit.
std::optional<std::string> splice_versionstamp(std::string_view with_offset,
                                               std::string_view stamp);
// The offset a SET_VERSIONSTAMPED_* parameter names, if its placeholder fits; nullopt otherwise.
std::optional<std::uint32_t> versionstamp_offset(std::string_view with_offset);

// The base64 alphabets of RFC 4648: kStandard (section 4, "+/", padded with "=") and kUrl
// (section 5, "-_", without padding: shell-safe).
enum class Base64 { kStandard, kUrl };
// The 64 digits of `alphabet`, in order of value.
std::string_view base64_digits(Base64 alphabet);
// `bytes` in base64 with `alphabet`.
std::string base64(std::string_view bytes, Base64 alphabet);

// `ranges` sorted by begin with overlapping or touching ranges merged and empty ones dropped.
std::vector<KeyRange> merge_ranges(std::vector<KeyRange> ranges);
// The parts of `ranges` outside every range of `minus`, merged (as merge_ranges).
std::vector<KeyRange> subtract_ranges(std::vector<KeyRange> ranges, std::vector<KeyRange> minus);

}  // namespace kvq::common

#endif  // KVQ_SRC_COMMON_BYTES_H_
