// FoundationDB tuple encoding (apple/foundationdb design/tuple.md), see docs/tuple.md.
#include "kvq/tuple.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

namespace kvq {
namespace {

constexpr std::uint8_t kNullCode = 0x00;
constexpr std::uint8_t kBytesCode = 0x01;
constexpr std::uint8_t kStringCode = 0x02;
constexpr std::uint8_t kNestedCode = 0x05;
constexpr std::uint8_t kNegIntStart = 0x0b;  // negative integers of 9..255 bytes
constexpr std::uint8_t kIntZeroCode = 0x14;
constexpr std::uint8_t kPosIntEnd = 0x1d;  // positive integers of 9..255 bytes
constexpr std::uint8_t kFloatCode = 0x20;
constexpr std::uint8_t kDoubleCode = 0x21;
constexpr std::uint8_t kFalseCode = 0x26;
constexpr std::uint8_t kTrueCode = 0x27;
constexpr std::uint8_t kUuidCode = 0x30;
constexpr std::uint8_t kVersionstampCode = 0x33;
constexpr std::uint8_t kEscape = 0xff;

// Deeper nesting is rejected by unpack so that malformed input cannot exhaust the stack.
constexpr int kMaxNestingDepth = 256;

[[noreturn]] void Fail(const std::string& what) {
  throw Error(ErrorCode::kInvalidTuple, "tuple: " + what);
}

[[noreturn]] void FailAt(const std::string& what, std::size_t offset) {
  Fail(what + " at offset " + std::to_string(offset));
}

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

static_assert(std::is_same_v<std::variant_alternative_t<1, TupleElement>, Bytes> &&
                  std::is_same_v<std::variant_alternative_t<2, TupleElement>, std::string> &&
                  std::is_same_v<std::variant_alternative_t<5, TupleElement>, BigInt> &&
                  std::is_same_v<std::variant_alternative_t<9, TupleElement>, Uuid> &&
                  std::is_same_v<std::variant_alternative_t<10, TupleElement>, Versionstamp> &&
                  std::is_same_v<std::variant_alternative_t<11, TupleElement>, Tuple>,
              "EstimateSize switches on these alternative indices");

// Upper bound-ish size of the encoding (exact except for escaped zero bytes), for reserve().
std::size_t EstimateSize(const std::vector<TupleElement>& elements) {
  std::size_t n = 0;
  for (const TupleElement& e : elements) {
    switch (e.index()) {
      case 1:
        n += std::get<Bytes>(e).data.size() + 2;
        break;
      case 2:
        n += std::get<std::string>(e).size() + 2;
        break;
      case 5:
        n += std::get<BigInt>(e).magnitude.size() + 2;
        break;
      case 9:
        n += 17;
        break;
      case 10:
        n += 13;
        break;
      case 11:
        n += EstimateSize(std::get<Tuple>(e).elements()) + 2;
        break;
      default:
        n += 9;
        break;
    }
  }
  return n;
}

class Encoder {
 public:
  Encoder(std::string& out, bool allow_incomplete)
      : out_(out), allow_incomplete_(allow_incomplete) {}

  void EncodeElements(const std::vector<TupleElement>& elements, bool nested) {
    for (const TupleElement& e : elements) EncodeElement(e, nested);
  }

  int incomplete_count() const { return incomplete_count_; }
  std::size_t incomplete_offset() const { return incomplete_offset_; }

 private:
  void EncodeElement(const TupleElement& e, bool nested) {
    std::visit([&](const auto& v) { Encode(v, nested); }, e);
  }

  void Encode(std::nullptr_t, bool nested) {
    out_.push_back(static_cast<char>(kNullCode));
    if (nested) out_.push_back(static_cast<char>(kEscape));
  }
  void Encode(const Bytes& b, bool) {
    out_.push_back(static_cast<char>(kBytesCode));
    AppendEscaped(out_, b.data);
  }
  void Encode(const std::string& s, bool) {
    out_.push_back(static_cast<char>(kStringCode));
    AppendEscaped(out_, s);
  }
  void Encode(std::int64_t v, bool) { EncodeInt(out_, v); }
  void Encode(std::uint64_t v, bool) { EncodeUint(out_, v); }
  void Encode(const BigInt& v, bool) {
    const std::string& m = v.magnitude;
    if (m.size() <= 8) {
      // Only negatives in (-(2^64-1), -2^63) are BigInts of <= 8 bytes; positives that fit are
      // uint64. Either way the fixed-length forms apply.
      std::uint64_t mag = 0;
      for (char c : m) mag = (mag << 8) | static_cast<std::uint8_t>(c);
      if (v.negative) {
        EncodeNegative(out_, mag);
      } else {
        EncodeUint(out_, mag);
      }
      return;
    }
    if (v.negative) {
      out_.push_back(static_cast<char>(kNegIntStart));
      out_.push_back(static_cast<char>(static_cast<std::uint8_t>(m.size()) ^ 0xff));
      for (char c : m) out_.push_back(static_cast<char>(~static_cast<std::uint8_t>(c)));
    } else {
      out_.push_back(static_cast<char>(kPosIntEnd));
      out_.push_back(static_cast<char>(m.size()));
      out_.append(m);
    }
  }
  void Encode(float f, bool) {
    out_.push_back(static_cast<char>(kFloatCode));
    AppendBigEndian(out_, FloatKey(f), 4);
  }
  void Encode(double d, bool) {
    out_.push_back(static_cast<char>(kDoubleCode));
    AppendBigEndian(out_, DoubleKey(d), 8);
  }
  void Encode(bool b, bool) { out_.push_back(static_cast<char>(b ? kTrueCode : kFalseCode)); }
  void Encode(const Uuid& u, bool) {
    out_.push_back(static_cast<char>(kUuidCode));
    out_.append(reinterpret_cast<const char*>(u.bytes.data()), u.bytes.size());
  }
  void Encode(const Versionstamp& v, bool) {
    out_.push_back(static_cast<char>(kVersionstampCode));
    if (!v.is_complete()) {
      if (!allow_incomplete_) {
        Fail("pack() of a tuple holding an incomplete versionstamp (use pack_with_versionstamp)");
      }
      ++incomplete_count_;
      incomplete_offset_ = out_.size();
    }
    out_.append(reinterpret_cast<const char*>(v.tr_version.data()), v.tr_version.size());
    out_.push_back(static_cast<char>(v.user_version >> 8));
    out_.push_back(static_cast<char>(v.user_version & 0xff));
  }
  void Encode(const Tuple& t, bool) {
    out_.push_back(static_cast<char>(kNestedCode));
    EncodeElements(t.elements(), /*nested=*/true);
    out_.push_back('\0');
  }

  std::string& out_;
  bool allow_incomplete_;
  int incomplete_count_ = 0;
  std::size_t incomplete_offset_ = 0;
};

// Offset of the first byte of s that is not part of valid UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), or s.size() if s is valid.
std::size_t FirstInvalidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const std::uint8_t c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    std::uint8_t lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return i;
    }
    if (n - i < len) return i;
    if (p[i + 1] < lo || p[i + 1] > hi) return i;
    for (std::size_t k = 2; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return i;
    }
    i += len;
  }
  return n;
}

std::string HexByte(std::uint8_t b) {
  static constexpr char kHex[] = "0123456789abcdef";
  return {kHex[b >> 4], kHex[b & 15]};
}

// Decimal digits of a big-endian magnitude.
std::string MagnitudeToDecimal(std::string_view magnitude) {
  std::vector<std::uint8_t> digits(magnitude.begin(), magnitude.end());
  std::string out;
  auto is_zero = [&] {
    return std::all_of(digits.begin(), digits.end(), [](std::uint8_t d) { return d == 0; });
  };
  if (is_zero()) return "0";
  while (!is_zero()) {
    unsigned rem = 0;
    for (std::uint8_t& d : digits) {
      const unsigned cur = (rem << 8) | d;
      d = static_cast<std::uint8_t>(cur / 10);
      rem = cur % 10;
    }
    out.push_back(static_cast<char>('0' + rem));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

void AppendQuoted(std::string& out, std::string_view s, bool bytes) {
  if (bytes) out.push_back('b');
  out.push_back('"');
  for (char ch : s) {
    const auto c = static_cast<std::uint8_t>(ch);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(ch);
    } else if (c < 0x20 || c == 0x7f || (bytes && c >= 0x80)) {
      out += "\\x";
      out += HexByte(c);
    } else {
      out.push_back(ch);  // printable ASCII, or UTF-8 bytes of a string
    }
  }
  out.push_back('"');
}

template <typename F>
void AppendFloating(std::string& out, F v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string_view s(buf, static_cast<std::size_t>(res.ptr - buf));
  out += s;
  if (s.find_first_of(".eEni") == std::string_view::npos) out += ".0";
}

void AppendRepr(std::string& out, const std::vector<TupleElement>& elements);

void AppendElementRepr(std::string& out, const TupleElement& e) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::nullptr_t>) {
          out += "None";
        } else if constexpr (std::is_same_v<T, Bytes>) {
          AppendQuoted(out, v.data, /*bytes=*/true);
        } else if constexpr (std::is_same_v<T, std::string>) {
          AppendQuoted(out, v, /*bytes=*/false);
        } else if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint64_t>) {
          out += std::to_string(v);
        } else if constexpr (std::is_same_v<T, BigInt>) {
          if (v.negative) out.push_back('-');
          out += MagnitudeToDecimal(v.magnitude);
        } else if constexpr (std::is_same_v<T, float>) {
          AppendFloating(out, v);
          out.push_back('f');
        } else if constexpr (std::is_same_v<T, double>) {
          AppendFloating(out, v);
        } else if constexpr (std::is_same_v<T, bool>) {
          out += v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, Uuid>) {
          out += "UUID(\"";
          for (std::size_t i = 0; i < 16; ++i) {
            if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
            out += HexByte(v.bytes[i]);
          }
          out += "\")";
        } else if constexpr (std::is_same_v<T, Versionstamp>) {
          out += "Versionstamp(";
          if (v.is_complete()) {
            for (std::uint8_t b : v.tr_version) out += HexByte(b);
          } else {
            out += "incomplete";
          }
          out += ", " + std::to_string(v.user_version) + ")";
        } else {
          static_assert(std::is_same_v<T, Tuple>);
          AppendRepr(out, v.elements());
        }
      },
      e);
}

void AppendRepr(std::string& out, const std::vector<TupleElement>& elements) {
  out.push_back('(');
  for (std::size_t i = 0; i < elements.size(); ++i) {
    if (i > 0) out += ", ";
    AppendElementRepr(out, elements[i]);
  }
  if (elements.size() == 1) out.push_back(',');
  out.push_back(')');
}

std::string EncodeElementForCompare(const TupleElement& e) {
  std::string out;
  Encoder enc(out, /*allow_incomplete=*/true);
  enc.EncodeElements(std::vector<TupleElement>{e}, /*nested=*/false);
  return out;
}

std::strong_ordering CompareElements(const TupleElement& a, const TupleElement& b) {
  // Fast paths whose order provably equals the order of the encodings.
  if (a.index() == b.index()) {
    if (const auto* x = std::get_if<std::int64_t>(&a)) return *x <=> std::get<std::int64_t>(b);
    if (const auto* x = std::get_if<std::string>(&a)) {
      const int c = x->compare(std::get<std::string>(b));  // unsigned, as char_traits<char>
      return c <=> 0;
    }
    if (const auto* x = std::get_if<Bytes>(&a)) {
      const int c = x->data.compare(std::get<Bytes>(b).data);
      return c <=> 0;
    }
    if (const auto* x = std::get_if<Tuple>(&a)) return *x <=> std::get<Tuple>(b);
  }
  const int c = EncodeElementForCompare(a).compare(EncodeElementForCompare(b));
  return c <=> 0;
}

template <typename T>
const T& GetAs(const std::vector<TupleElement>& elements, std::size_t i, const char* type) {
  if (i >= elements.size()) {
    Fail("index " + std::to_string(i) + " out of range (size " + std::to_string(elements.size()) +
         ")");
  }
  const T* v = std::get_if<T>(&elements[i]);
  if (v == nullptr) Fail("element " + std::to_string(i) + " is not " + type);
  return *v;
}

}  // namespace

// Decodes tuple bytes; a friend of Tuple so elements are built in place.
class TupleDecoder {
 public:
  explicit TupleDecoder(std::string_view in)
      : p_(reinterpret_cast<const std::uint8_t*>(in.data())), n_(in.size()) {}

  void DecodeTop(std::vector<TupleElement>& out) {
    while (pos_ < n_) out.push_back(DecodeElement(0));
  }
  static void DecodeInto(std::string_view in, Tuple& t) { TupleDecoder(in).DecodeTop(t.elements_); }

 private:
  // Decodes the nested tuple whose 0x05 code is at pos_ - 1; leaves pos_ after its terminator.
  Tuple DecodeNested(std::size_t start, int depth) {
    if (depth > kMaxNestingDepth) {
      FailAt("nested tuple deeper than " + std::to_string(kMaxNestingDepth) + " levels", start);
    }
    Tuple t;
    while (true) {
      if (pos_ >= n_) FailAt("nested tuple without terminator (started)", start);
      if (p_[pos_] == kNullCode) {
        if (pos_ + 1 < n_ && p_[pos_ + 1] == kEscape) {
          t.elements_.emplace_back(nullptr);
          pos_ += 2;
          continue;
        }
        ++pos_;  // the terminator
        return t;
      }
      t.elements_.push_back(DecodeElement(depth));
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

  TupleElement DecodeElement(int depth) {
    const std::size_t start = pos_;
    const std::uint8_t code = p_[pos_++];
    switch (code) {
      case kNullCode:
        return nullptr;
      case kBytesCode:
        return Bytes(ReadEscaped(start, "byte string"));
      case kStringCode: {
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
      case kNestedCode:
        return DecodeNested(start, depth + 1);
      case kNegIntStart:
      case kPosIntEnd: {
        const bool negative = code == kNegIntStart;
        Need(1, start, "integer");
        const std::size_t len = negative ? (p_[pos_] ^ 0xffu) : p_[pos_];
        ++pos_;
        if (len <= 8)
          FailAt("non-canonical big integer (length " + std::to_string(len) + ")", start);
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
      case kUuidCode: {
        Need(16, start, "UUID");
        Uuid u;
        std::memcpy(u.bytes.data(), p_ + pos_, 16);
        pos_ += 16;
        return u;
      }
      case kVersionstampCode: {
        Need(12, start, "versionstamp");
        Versionstamp v;
        std::memcpy(v.tr_version.data(), p_ + pos_, 10);
        v.user_version = static_cast<std::uint16_t>((p_[pos_ + 10] << 8) | p_[pos_ + 11]);
        pos_ += 12;
        return v;
      }
      default:
        break;
    }
    if (code > kNegIntStart && code < kPosIntEnd) {
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
    FailAt("unknown type code 0x" + HexByte(code), start);
  }

  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t pos_ = 0;
};

// --- Versionstamp --------------------------------------------------------------------------------

Versionstamp Versionstamp::incomplete(std::uint16_t user_version) {
  Versionstamp v;
  v.tr_version.fill(0xff);
  v.user_version = user_version;
  return v;
}

Versionstamp Versionstamp::complete(std::string_view tr_version, std::uint16_t user_version) {
  if (tr_version.size() != 10) {
    Fail("versionstamp transaction version must be 10 bytes, got " +
         std::to_string(tr_version.size()));
  }
  Versionstamp v;
  std::memcpy(v.tr_version.data(), tr_version.data(), 10);
  v.user_version = user_version;
  return v;
}

bool Versionstamp::is_complete() const {
  return std::any_of(tr_version.begin(), tr_version.end(),
                     [](std::uint8_t b) { return b != 0xff; });
}

std::string Versionstamp::bytes() const {
  std::string out(reinterpret_cast<const char*>(tr_version.data()), tr_version.size());
  out.push_back(static_cast<char>(user_version >> 8));
  out.push_back(static_cast<char>(user_version & 0xff));
  return out;
}

// --- Tuple: building -----------------------------------------------------------------------------

Tuple& Tuple::append(std::nullptr_t) {
  elements_.emplace_back(nullptr);
  return *this;
}
Tuple& Tuple::append(const Bytes& b) {
  elements_.emplace_back(b);
  return *this;
}
Tuple& Tuple::append(std::string_view s) {
  elements_.emplace_back(std::in_place_type<std::string>, s);
  return *this;
}
Tuple& Tuple::append(const std::string& s) {
  elements_.emplace_back(std::in_place_type<std::string>, s);
  return *this;
}
Tuple& Tuple::append(const char* s) { return append(std::string_view(s)); }
Tuple& Tuple::append(bool b) {
  elements_.emplace_back(b);
  return *this;
}
Tuple& Tuple::append(signed char v) { return append(static_cast<long long>(v)); }
Tuple& Tuple::append(unsigned char v) { return append(static_cast<long long>(v)); }
Tuple& Tuple::append(short v) { return append(static_cast<long long>(v)); }
Tuple& Tuple::append(unsigned short v) { return append(static_cast<long long>(v)); }
Tuple& Tuple::append(int v) { return append(static_cast<long long>(v)); }
Tuple& Tuple::append(unsigned int v) { return append(static_cast<long long>(v)); }
Tuple& Tuple::append(long v) { return append(static_cast<long long>(v)); }
Tuple& Tuple::append(unsigned long v) { return append(static_cast<unsigned long long>(v)); }
Tuple& Tuple::append(long long v) {
  elements_.emplace_back(std::in_place_type<std::int64_t>, v);
  return *this;
}
Tuple& Tuple::append(unsigned long long v) {
  if (v <= static_cast<unsigned long long>(std::numeric_limits<std::int64_t>::max())) {
    elements_.emplace_back(std::in_place_type<std::int64_t>, static_cast<std::int64_t>(v));
  } else {
    elements_.emplace_back(std::in_place_type<std::uint64_t>, v);
  }
  return *this;
}
Tuple& Tuple::append(const BigInt& v) {
  const std::size_t first = v.magnitude.find_first_not_of('\0');
  if (first == std::string::npos) return append(0LL);
  std::string_view m = std::string_view(v.magnitude).substr(first);
  if (m.size() > 255) Fail("big integer magnitude longer than 255 bytes");
  if (m.size() <= 8) {
    std::uint64_t mag = 0;
    for (char c : m) mag = (mag << 8) | static_cast<std::uint8_t>(c);
    if (!v.negative) return append(static_cast<unsigned long long>(mag));
    if (mag <= (std::uint64_t{1} << 63)) {
      elements_.emplace_back(std::in_place_type<std::int64_t>,
                             static_cast<std::int64_t>(std::uint64_t{0} - mag));
      return *this;
    }
  }
  elements_.emplace_back(BigInt{v.negative, std::string(m)});
  return *this;
}
Tuple& Tuple::append(float v) {
  elements_.emplace_back(v);
  return *this;
}
Tuple& Tuple::append(double v) {
  elements_.emplace_back(v);
  return *this;
}
Tuple& Tuple::append(const Uuid& v) {
  elements_.emplace_back(v);
  return *this;
}
Tuple& Tuple::append(const Versionstamp& v) {
  elements_.emplace_back(v);
  return *this;
}
Tuple& Tuple::append(const Tuple& nested) {
  elements_.emplace_back(std::in_place_type<Tuple>, nested);
  return *this;
}
Tuple& Tuple::extend(const Tuple& other) {
  if (&other == this) {
    const std::vector<TupleElement> copy = other.elements_;
    elements_.insert(elements_.end(), copy.begin(), copy.end());
  } else {
    elements_.insert(elements_.end(), other.elements_.begin(), other.elements_.end());
  }
  return *this;
}

// --- Tuple: encoding -----------------------------------------------------------------------------

void Tuple::pack_into(std::string& out) const {
  out.reserve(out.size() + EstimateSize(elements_));
  Encoder enc(out, /*allow_incomplete=*/false);
  enc.EncodeElements(elements_, /*nested=*/false);
}

std::string Tuple::pack() const {
  std::string out;
  pack_into(out);
  return out;
}

std::string Tuple::pack_with_versionstamp(std::string_view prefix) const {
  std::string out;
  out.reserve(prefix.size() + EstimateSize(elements_) + 4);
  out.append(prefix);
  Encoder enc(out, /*allow_incomplete=*/true);
  enc.EncodeElements(elements_, /*nested=*/false);
  if (enc.incomplete_count() != 1) {
    Fail("pack_with_versionstamp needs exactly one incomplete versionstamp, found " +
         std::to_string(enc.incomplete_count()));
  }
  const std::size_t offset = enc.incomplete_offset();
  if (offset > std::numeric_limits<std::uint32_t>::max()) Fail("versionstamp offset beyond 2^32");
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(offset >> (8 * i)));
  return out;
}

Tuple Tuple::unpack(std::string_view packed) {
  Tuple t;
  TupleDecoder::DecodeInto(packed, t);
  return t;
}

// --- Tuple: access -------------------------------------------------------------------------------

const TupleElement& Tuple::operator[](std::size_t i) const {
  if (i >= elements_.size()) {
    Fail("index " + std::to_string(i) + " out of range (size " + std::to_string(elements_.size()) +
         ")");
  }
  return elements_[i];
}

std::int64_t Tuple::get_int(std::size_t i) const {
  return GetAs<std::int64_t>(elements_, i, "an integer in the int64 range");
}

std::uint64_t Tuple::get_uint(std::size_t i) const {
  if (i < elements_.size()) {
    if (const auto* v = std::get_if<std::int64_t>(&elements_[i]); v != nullptr && *v >= 0) {
      return static_cast<std::uint64_t>(*v);
    }
  }
  return GetAs<std::uint64_t>(elements_, i, "a non-negative integer in the uint64 range");
}

std::string Tuple::get_string(std::size_t i) const {
  return GetAs<std::string>(elements_, i, "a string");
}
Bytes Tuple::get_bytes(std::size_t i) const { return GetAs<Bytes>(elements_, i, "a byte string"); }
float Tuple::get_float(std::size_t i) const { return GetAs<float>(elements_, i, "a float"); }
double Tuple::get_double(std::size_t i) const { return GetAs<double>(elements_, i, "a double"); }
bool Tuple::get_bool(std::size_t i) const { return GetAs<bool>(elements_, i, "a bool"); }
bool Tuple::is_null(std::size_t i) const {
  if (i >= elements_.size()) {
    Fail("index " + std::to_string(i) + " out of range (size " + std::to_string(elements_.size()) +
         ")");
  }
  return std::holds_alternative<std::nullptr_t>(elements_[i]);
}
Uuid Tuple::get_uuid(std::size_t i) const { return GetAs<Uuid>(elements_, i, "a UUID"); }
Versionstamp Tuple::get_versionstamp(std::size_t i) const {
  return GetAs<Versionstamp>(elements_, i, "a versionstamp");
}
Tuple Tuple::get_tuple(std::size_t i) const { return GetAs<Tuple>(elements_, i, "a nested tuple"); }

std::string Tuple::to_string() const {
  std::string out;
  AppendRepr(out, elements_);
  return out;
}

// --- Tuple: comparison ---------------------------------------------------------------------------

bool operator==(const Tuple& a, const Tuple& b) { return (a <=> b) == 0; }

std::strong_ordering operator<=>(const Tuple& a, const Tuple& b) {
  const std::size_t n = std::min(a.elements_.size(), b.elements_.size());
  for (std::size_t i = 0; i < n; ++i) {
    const std::strong_ordering c = CompareElements(a.elements_[i], b.elements_[i]);
    if (c != 0) return c;
  }
  return a.elements_.size() <=> b.elements_.size();
}

}  // namespace kvq
