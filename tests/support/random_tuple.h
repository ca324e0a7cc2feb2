// Random tuples of every element type, for the tuple property and fuzz tests.
#ifndef KVQ_TESTS_SUPPORT_RANDOM_TUPLE_H_
#define KVQ_TESTS_SUPPORT_RANDOM_TUPLE_H_

#include <bit>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <variant>

#include "kvq/tuple.h"

namespace kvq::testing {

// Appends the UTF-8 encoding of code point cp (must not be a surrogate, <= 0x10FFFF).
inline void AppendUtf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

class RandomTuples {
 public:
  explicit RandomTuples(std::uint64_t seed) : rng_(seed) {}

  std::uint64_t Uniform(std::uint64_t n) {
    return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng_);
  }
  std::uint64_t Bits() { return rng_(); }
  std::mt19937_64& rng() { return rng_; }

  // A tuple of 0..max_len elements, nested tuples down to `depth` more levels.
  Tuple Make(int depth = 3, std::uint64_t max_len = 6) {
    Tuple t;
    const std::uint64_t n = Uniform(max_len + 1);
    for (std::uint64_t i = 0; i < n; ++i) AppendRandom(t, depth);
    return t;
  }

  // Byte strings biased towards 0x00 and 0xff (the escape bytes) and short lengths.
  std::string RawBytes(std::uint64_t max_len) {
    std::string s;
    const std::uint64_t n = Uniform(max_len + 1);
    for (std::uint64_t i = 0; i < n; ++i) {
      switch (Uniform(4)) {
        case 0:
          s.push_back('\0');
          break;
        case 1:
          s.push_back('\xff');
          break;
        default:
          s.push_back(static_cast<char>(Uniform(256)));
          break;
      }
    }
    return s;
  }

  std::string Utf8(std::uint64_t max_len) {
    std::string s;
    const std::uint64_t n = Uniform(max_len + 1);
    for (std::uint64_t i = 0; i < n; ++i) {
      std::uint32_t cp;
      switch (Uniform(5)) {
        case 0:
          cp = 0;
          break;
        case 1:
          cp = static_cast<std::uint32_t>(Uniform(0x80));
          break;
        case 2:
          cp = static_cast<std::uint32_t>(0x80 + Uniform(0x800 - 0x80));
          break;
        case 3:
          cp = static_cast<std::uint32_t>(0x800 + Uniform(0xd800 - 0x800));
          break;
        default:
          cp = static_cast<std::uint32_t>(0x10000 + Uniform(0x110000 - 0x10000));
          break;
      }
      AppendUtf8(s, cp);
    }
    return s;
  }

  // An integer within 2 of a size boundary 2^(8k) (k = 0..8), 2^63 or 2^64-1, of either sign,
  // built as a BigInt so that append() normalises it to int64 / uint64 / BigInt.
  BigInt EdgeInt() {
    const std::uint64_t k = Uniform(10);
    std::uint64_t m = k == 0   ? 0
                      : k < 8  ? std::uint64_t{1} << (8 * k)
                      : k == 8 ? std::uint64_t{1} << 63
                               : ~std::uint64_t{0};
    m = m + Uniform(5) - 2;  // modular: near 0 this wraps to near 2^64, also a boundary
    BigInt b;
    b.negative = Uniform(2) == 1;
    for (int i = 7; i >= 0; --i) b.magnitude.push_back(static_cast<char>(m >> (8 * i)));
    return b;
  }

  void AppendRandom(Tuple& t, int depth) {
    switch (Uniform(depth > 0 ? 14 : 13)) {
      case 0:
        t.append(nullptr);
        break;
      case 1:
        t.append(Bytes(RawBytes(12)));
        break;
      case 2:
        t.append(Utf8(8));
        break;
      case 3:
        t.append(EdgeInt());
        break;
      case 4:
        t.append(static_cast<std::int64_t>(Bits() >> Uniform(64)));
        break;
      case 5:
        t.append(Bits() | (std::uint64_t{1} << 63));
        break;  // uint64 above INT64_MAX
      case 6: {
        BigInt b;
        b.negative = Uniform(2) == 1;
        // 8-byte negatives beyond -2^63 and 9..20 byte magnitudes, sometimes at the extremes.
        const std::uint64_t len = b.negative && Uniform(3) == 0 ? 8 : 9 + Uniform(12);
        for (std::uint64_t i = 0; i < len; ++i)
          b.magnitude.push_back(static_cast<char>(Uniform(256)));
        if (Uniform(4) == 0) b.magnitude.assign(len, '\xff');
        if (Uniform(4) == 0) b.magnitude.assign(len, '\0');
        b.magnitude[0] = static_cast<char>(static_cast<std::uint8_t>(b.magnitude[0]) | 0x80);
        if (Uniform(4) == 0) b.magnitude[0] = 1;
        t.append(b);
        break;
      }
      case 7:
        t.append(std::bit_cast<float>(static_cast<std::uint32_t>(Bits())));
        break;
      case 8:
        t.append(std::bit_cast<double>(Bits()));
        break;
      case 9: {
        static constexpr double kSpecial[] = {0.0,
                                              -0.0,
                                              1.5,
                                              -1.5,
                                              1e300,
                                              -1e-300,
                                              std::numeric_limits<double>::infinity(),
                                              -std::numeric_limits<double>::infinity(),
                                              std::numeric_limits<double>::quiet_NaN(),
                                              -std::numeric_limits<double>::quiet_NaN()};
        const double d = kSpecial[Uniform(std::size(kSpecial))];
        if (Uniform(2)) {
          t.append(d);
        } else {
          t.append(static_cast<float>(d));
        }
        break;
      }
      case 10:
        t.append(Uniform(2) == 1);
        break;
      case 11: {
        Uuid u;
        // Random bytes or only 0x00 / 0xff bytes (extremes of the order).
        const bool extremes = Uniform(2) == 1;
        for (auto& b : u.bytes)
          b = static_cast<std::uint8_t>(extremes ? Uniform(2) * 0xff : Uniform(256));
        t.append(u);
        break;
      }
      case 12: {
        Versionstamp v;
        for (auto& b : v.tr_version) b = static_cast<std::uint8_t>(Uniform(256));
        v.tr_version[0] = static_cast<std::uint8_t>(Uniform(255));  // never all 0xff: complete
        v.user_version = static_cast<std::uint16_t>(Uniform(65536));
        t.append(v);
        break;
      }
      default:
        t.append(Make(depth - 1, 4));
        break;
    }
  }

 private:
  std::mt19937_64 rng_;
};

// Element-by-element equality that does not go through the encoding: same alternatives, floats
// equal bit for bit, nested tuples recursively.
inline bool StructurallyEqual(const Tuple& a, const Tuple& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const TupleElement& x = a[i];
    const TupleElement& y = b[i];
    if (x.index() != y.index()) return false;
    const bool same = std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          const T& w = std::get<T>(y);
          if constexpr (std::is_same_v<T, float>) {
            return std::bit_cast<std::uint32_t>(v) == std::bit_cast<std::uint32_t>(w);
          } else if constexpr (std::is_same_v<T, double>) {
            return std::bit_cast<std::uint64_t>(v) == std::bit_cast<std::uint64_t>(w);
          } else if constexpr (std::is_same_v<T, Tuple>) {
            return StructurallyEqual(v, w);
          } else {
            return v == w;
          }
        },
        x);
    if (!same) return false;
  }
  return true;
}

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_RANDOM_TUPLE_H_
