// Python-style repr of tuples (Tuple::to_string) and the UTF-8 check the decoder shares.
#include <algorithm>
#include <charconv>
#include <vector>

#include "tuple/tuple_codec.h"

namespace kvq::tuple_codec {

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

}  // namespace kvq::tuple_codec
