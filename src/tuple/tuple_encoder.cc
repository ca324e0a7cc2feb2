// The tuple encoder: elements to bytes (docs/tuple.md).
#include <string>
#include <type_traits>
#include <variant>

#include "tuple/tuple_codec.h"

namespace kvq::tuple_codec {
namespace {

static_assert(std::is_same_v<std::variant_alternative_t<1, TupleElement>, Bytes> &&
                  std::is_same_v<std::variant_alternative_t<2, TupleElement>, std::string> &&
                  std::is_same_v<std::variant_alternative_t<5, TupleElement>, BigInt> &&
                  std::is_same_v<std::variant_alternative_t<9, TupleElement>, Uuid> &&
                  std::is_same_v<std::variant_alternative_t<10, TupleElement>, Versionstamp> &&
                  std::is_same_v<std::variant_alternative_t<11, TupleElement>, Tuple>,
              "EstimateSize switches on these alternative indices");

class Encoder {
 public:
  Encoder(std::string& out, bool allow_incomplete, bool check_utf8)
      : out_(out), allow_incomplete_(allow_incomplete), check_utf8_(check_utf8) {}

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
    if (check_utf8_) {
      if (const std::size_t bad = FirstInvalidUtf8(s); bad != s.size()) {
        Fail("a string element is not valid UTF-8 (byte " + std::to_string(bad) +
             "); append arbitrary bytes as Bytes");
      }
    }
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
  bool check_utf8_;
  int incomplete_count_ = 0;
  std::size_t incomplete_offset_ = 0;
};

}  // namespace

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

EncodeResult EncodeElements(std::string& out, const std::vector<TupleElement>& elements,
                            bool allow_incomplete, bool check_utf8) {
  Encoder encoder(out, allow_incomplete, check_utf8);
  encoder.EncodeElements(elements, /*nested=*/false);
  return EncodeResult{encoder.incomplete_count(), encoder.incomplete_offset()};
}

}  // namespace kvq::tuple_codec
