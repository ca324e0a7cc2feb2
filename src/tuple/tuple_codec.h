// Internal: the pieces of the FoundationDB tuple encoding (docs/tuple.md) that tuple.cc, the
// encoder, the decoder and the printer share: type codes, number-to-key transforms, errors.
#ifndef KVQ_SRC_TUPLE_TUPLE_CODEC_H_
#define KVQ_SRC_TUPLE_TUPLE_CODEC_H_

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvq/tuple.h"

namespace kvq {

// Decodes tuple bytes (tuple_decoder.cc); a friend of Tuple so elements are built in place.
class TupleDecoder {
 public:
  // The tuple `packed` encodes. Throws invalid_tuple (with the offset) for malformed input.
  static Tuple Decode(std::string_view packed);
  // A tuple holding `elements`.
  static Tuple Adopt(std::vector<TupleElement> elements) {
    Tuple t;
    t.elements_ = std::move(elements);
    return t;
  }
};

namespace tuple_codec {

inline constexpr std::uint8_t kNullCode = 0x00;
inline constexpr std::uint8_t kBytesCode = 0x01;
inline constexpr std::uint8_t kStringCode = 0x02;
inline constexpr std::uint8_t kNestedCode = 0x05;
inline constexpr std::uint8_t kNegIntStart = 0x0b;  // negative integers of 9..255 bytes
inline constexpr std::uint8_t kIntZeroCode = 0x14;
inline constexpr std::uint8_t kPosIntEnd = 0x1d;  // positive integers of 9..255 bytes
inline constexpr std::uint8_t kFloatCode = 0x20;
inline constexpr std::uint8_t kDoubleCode = 0x21;
inline constexpr std::uint8_t kFalseCode = 0x26;
inline constexpr std::uint8_t kTrueCode = 0x27;
inline constexpr std::uint8_t kUuidCode = 0x30;
inline constexpr std::uint8_t kVersionstampCode = 0x33;
inline constexpr std::uint8_t kEscape = 0xff;

// Deeper nesting is rejected by unpack so that malformed input cannot exhaust the stack.
inline constexpr int kMaxNestingDepth = 256;
// The capacity a tuple's element vector starts with: most tuples (keys) hold a few elements, and
// growing from one element costs an allocation per doubling.
inline constexpr std::size_t kFirstCapacity = 4;

// Throw invalid_tuple with "tuple: " + what (+ " at offset N").
[[noreturn]] void Fail(const std::string& what);
[[noreturn]] void FailAt(const std::string& what, std::size_t offset);

// Number of significant bytes of v (0 for v == 0).
inline int ByteLength(std::uint64_t v) { return (64 - std::countl_zero(v) + 7) / 8; }

inline void AppendBigEndian(std::string& out, std::uint64_t v, int n) {
  char buf[8];
  for (int i = 0; i < n; ++i) buf[i] = static_cast<char>(v >> (8 * (n - 1 - i)));
  out.append(buf, static_cast<std::size_t>(n));
}

inline void EncodeUint(std::string& out, std::uint64_t v) {
  const int n = ByteLength(v);
  out.push_back(static_cast<char>(kIntZeroCode + n));
  AppendBigEndian(out, v, n);
}

// -magnitude for 0 < magnitude <= 2^64-1: code 0x14-n, then n bytes of one's complement.
inline void EncodeNegative(std::string& out, std::uint64_t magnitude) {
  const int n = ByteLength(magnitude);
  out.push_back(static_cast<char>(kIntZeroCode - n));
  AppendBigEndian(out, ~magnitude, n);
}

inline void EncodeInt(std::string& out, std::int64_t v) {
  if (v >= 0) {
    EncodeUint(out, static_cast<std::uint64_t>(v));
  } else {
    EncodeNegative(out, std::uint64_t{0} - static_cast<std::uint64_t>(v));
  }
}

// Appends s with 0x00 escaped as 0x00 0xff, then the 0x00 terminator.
inline void AppendEscaped(std::string& out, std::string_view s) {
  const char* p = s.data();
  std::size_t left = s.size();
  while (left > 0) {
    const void* z = std::memchr(p, 0, left);
    if (z == nullptr) {
      out.append(p, left);
      break;
    }
    const std::size_t n = static_cast<std::size_t>(static_cast<const char*>(z) - p) + 1;
    out.append(p, n);
    out.push_back(static_cast<char>(kEscape));
    p += n;
    left -= n;
  }
  out.push_back('\0');
}

inline std::uint32_t FloatKey(float f) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  return (bits & 0x80000000u) ? ~bits : (bits ^ 0x80000000u);
}
inline std::uint64_t DoubleKey(double d) {
  std::uint64_t bits = std::bit_cast<std::uint64_t>(d);
  return (bits & 0x8000000000000000ull) ? ~bits : (bits ^ 0x8000000000000000ull);
}
inline float FloatFromKey(std::uint32_t key) {
  return std::bit_cast<float>((key & 0x80000000u) ? (key ^ 0x80000000u) : ~key);
}
inline double DoubleFromKey(std::uint64_t key) {
  return std::bit_cast<double>((key & 0x8000000000000000ull) ? (key ^ 0x8000000000000000ull)
                                                             : ~key);
}

// Upper bound-ish size of the encoding (exact except for escaped zero bytes), for reserve().
std::size_t EstimateSize(const std::vector<TupleElement>& elements);

// What EncodeElements saw of incomplete versionstamps.
struct EncodeResult {
  int incomplete_count = 0;           // incomplete versionstamps encoded
  std::size_t incomplete_offset = 0;  // offset in `out` of the last one's 10 bytes
};
// Appends the encoding of `elements` to `out` (top level, not nested). Throws invalid_tuple for an
// incomplete versionstamp unless `allow_incomplete`, and if `check_utf8` for a string element that
// is not valid UTF-8 (the decoder refuses it: kvq would write keys it cannot read back).
EncodeResult EncodeElements(std::string& out, const std::vector<TupleElement>& elements,
                            bool allow_incomplete, bool check_utf8 = true);

// Offset of the first byte of s that is not part of valid UTF-8 (RFC 3629), or s.size().
std::size_t FirstInvalidUtf8(std::string_view s);
// Two lowercase hex digits.
std::string HexByte(std::uint8_t b);
// Appends Python's repr of a tuple of `elements` (tuple_repr.cc).
void AppendRepr(std::string& out, const std::vector<TupleElement>& elements);

}  // namespace tuple_codec
}  // namespace kvq

#endif  // KVQ_SRC_TUPLE_TUPLE_CODEC_H_
