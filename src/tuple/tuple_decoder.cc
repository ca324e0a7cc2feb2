// The tuple decoder: bytes to elements, strict (docs/tuple.md: canonical forms only).
#include <algorithm>
#include <limits>

#include "tuple/tuple_codec.h"

namespace kvq {
namespace {
using namespace tuple_codec;  // the codec's own pieces

// Reads the elements of one encoded tuple, strictly, front to back.
class ElementReader {
 public:
  // The tuple `in` encodes; throws invalid_tuple with the offset of the first malformed byte.
  static Tuple DecodeAll(std::string_view in) {
    ElementReader reader(in);
    std::vector<TupleElement> out;
    if (!in.empty()) out.reserve(kFirstCapacity);
    while (reader.pos_ < reader.n_) out.push_back(reader.DecodeElement(0));
    return TupleDecoder::Adopt(std::move(out));
  }

 private:
  // Decodes the nested tuple whose 0x05 code is at pos_ - 1; leaves pos_ after its terminator.
  Tuple DecodeNested(std::size_t start, int depth) {
    if (depth > kMaxNestingDepth) {
      FailAt("nested tuple deeper than " + std::to_string(kMaxNestingDepth) + " levels", start);
    }
    std::vector<TupleElement> elements;
    elements.reserve(kFirstCapacity);
    while (true) {
      if (pos_ >= n_) FailAt("nested tuple without terminator (started)", start);
      if (p_[pos_] == kNullCode) {
        if (pos_ + 1 < n_ && p_[pos_ + 1] == kEscape) {
          elements.emplace_back(nullptr);
          pos_ += 2;
          continue;
        }
        ++pos_;  // the terminator
        return TupleDecoder::Adopt(std::move(elements));
      }
      elements.push_back(DecodeElement(depth));
    }
  }

  // Reads an escaped, 0x00-terminated string starting at pos_ (after the type code).
  std::string ReadEscaped(std::size_t start, const char* what) {
    std::string s;
    while (true) {
      const void* z = pos_ < n_ ? std::memchr(p_ + pos_, 0, n_ - pos_) : nullptr;
      if (z == nullptr) FailAt(std::string(what) + " without terminator (started)", start);
      const std::size_t zpos = static_cast<std::size_t>(static_cast<const std::uint8_t*>(z) - p_);
      s.append(reinterpret_cast<const char*>(p_ + pos_), zpos - pos_);
      if (zpos + 1 < n_ && p_[zpos + 1] == kEscape) {
        s.push_back('\0');
        pos_ = zpos + 2;
      } else {
        pos_ = zpos + 1;
        return s;
      }
    }
  }

  void Need(std::size_t bytes, std::size_t start, const char* what) {
    if (n_ - pos_ < bytes) FailAt(std::string("truncated ") + what, start);
  }

  std::uint64_t ReadBigEndian(int n) {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | p_[pos_ + static_cast<std::size_t>(i)];
    pos_ += static_cast<std::size_t>(n);
    return v;
  }

  explicit ElementReader(std::string_view in)
      : p_(reinterpret_cast<const std::uint8_t*>(in.data())), n_(in.size()) {}

  // Decodes the element whose type code is at pos_; leaves pos_ after it.
  TupleElement DecodeElement(int depth) {
    const std::size_t start = pos_;
    const std::uint8_t code = p_[pos_++];
    switch (code) {
      case kNullCode:
        return nullptr;
      case kBytesCode:
        return Bytes(ReadEscaped(start, "byte string"));
      case kStringCode:
        return DecodeString(start);
      case kNestedCode:
        return DecodeNested(start, depth + 1);
      case kNegIntStart:
      case kPosIntEnd:
        return DecodeBigInt(start, code == kNegIntStart);
      case kFloatCode:
        Need(4, start, "float");
        return FloatFromKey(static_cast<std::uint32_t>(ReadBigEndian(4)));
      case kDoubleCode:
        Need(8, start, "double");
        return DoubleFromKey(ReadBigEndian(8));
      case kFalseCode:
        return false;
      case kTrueCode:
        return true;
      case kUuidCode:
        return DecodeUuid(start);
      case kVersionstampCode:
        return DecodeVersionstamp(start);
      default:
        break;
    }
    if (code > kNegIntStart && code < kPosIntEnd) return DecodeFixedInt(start, code);
    FailAt("unknown type code 0x" + HexByte(code), start);
  }

  // A UTF-8 string (code 0x02 at `start`).
  TupleElement DecodeString(std::size_t start) {
    std::string s = ReadEscaped(start, "string");
    const std::size_t bad = FirstInvalidUtf8(s);
    if (bad != s.size()) {
      // Report the offset in the input; escapes before `bad` each add one byte.
      std::size_t zeros = static_cast<std::size_t>(
          std::count(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(bad), '\0'));
      FailAt("invalid UTF-8 in string", start + 1 + bad + zeros);
    }
    return s;
  }

  // An integer of 9..255 bytes (codes 0x0b and 0x1d): always a BigInt.
  TupleElement DecodeBigInt(std::size_t start, bool negative) {
    Need(1, start, "integer");
    const std::size_t len = negative ? (p_[pos_] ^ 0xffu) : p_[pos_];
    ++pos_;
    if (len <= 8) FailAt("non-canonical big integer (length " + std::to_string(len) + ")", start);
    Need(len, start, "integer");
    BigInt b;
    b.negative = negative;
    b.magnitude.assign(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    if (negative) {
      for (char& c : b.magnitude) c = static_cast<char>(~static_cast<std::uint8_t>(c));
    }
    if (b.magnitude[0] == '\0') FailAt("non-canonical integer (leading zero byte)", start);
    return b;
  }

  // An integer of 0..8 bytes (codes 0x0c..0x1c): int64 if it fits, else uint64 or BigInt.
  TupleElement DecodeFixedInt(std::size_t start, std::uint8_t code) {
    if (code == kIntZeroCode) return std::int64_t{0};
    const bool negative = code < kIntZeroCode;
    const int n = negative ? kIntZeroCode - code : code - kIntZeroCode;
    Need(static_cast<std::size_t>(n), start, "integer");
    if (p_[pos_] == (negative ? 0xff : 0x00)) {
      FailAt("non-canonical integer (leading zero byte)", start);
    }
    const std::uint64_t raw = ReadBigEndian(n);
    if (!negative) {
      if (raw <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return static_cast<std::int64_t>(raw);
      }
      return raw;
    }
    const std::uint64_t mask = n == 8 ? ~std::uint64_t{0} : ((std::uint64_t{1} << (8 * n)) - 1);
    const std::uint64_t magnitude = ~raw & mask;
    if (magnitude <= (std::uint64_t{1} << 63)) {
      return static_cast<std::int64_t>(std::uint64_t{0} - magnitude);
    }
    BigInt b;
    b.negative = true;
    for (int i = 7; i >= 0; --i) b.magnitude.push_back(static_cast<char>(magnitude >> (8 * i)));
    return b;
  }

  TupleElement DecodeUuid(std::size_t start) {
    Need(16, start, "UUID");
    Uuid u;
    std::memcpy(u.bytes.data(), p_ + pos_, 16);
    pos_ += 16;
    return u;
  }

  TupleElement DecodeVersionstamp(std::size_t start) {
    Need(12, start, "versionstamp");
    Versionstamp v;
    std::memcpy(v.tr_version.data(), p_ + pos_, 10);
    v.user_version = static_cast<std::uint16_t>((p_[pos_ + 10] << 8) | p_[pos_ + 11]);
    pos_ += 12;
    return v;
  }

  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t pos_ = 0;
};

}  // namespace

Tuple TupleDecoder::Decode(std::string_view packed) { return ElementReader::DecodeAll(packed); }

}  // namespace kvq
