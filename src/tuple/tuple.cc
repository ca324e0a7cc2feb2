// FoundationDB tuple encoding (apple/foundationdb design/tuple.md), see docs/tuple.md: the Tuple
// and Versionstamp classes. The encoder, decoder and printer are in tuple_encoder.cc,
// tuple_decoder.cc and tuple_repr.cc.
#include "kvq/tuple.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "common/bytes.h"
#include "tuple/tuple_codec.h"

namespace kvq {
namespace tuple_codec {

void Fail(const std::string& what) { throw Error(ErrorCode::kInvalidTuple, "tuple: " + what); }

void FailAt(const std::string& what, std::size_t offset) {
  Fail(what + " at offset " + std::to_string(offset));
}

}  // namespace tuple_codec

namespace {
using tuple_codec::Fail;

std::string EncodeElementForCompare(const TupleElement& e) {
  std::string out;
  tuple_codec::EncodeElements(out, std::vector<TupleElement>{e}, /*allow_incomplete=*/true,
                              /*check_utf8=*/false);
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

// `elements`, with room for one more element (kFirstCapacity at the first one).
std::vector<TupleElement>& room_for_one(std::vector<TupleElement>& elements) {
  if (elements.capacity() == 0) elements.reserve(tuple_codec::kFirstCapacity);
  return elements;
}

}  // namespace

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
  room_for_one(elements_).emplace_back(nullptr);
  return *this;
}
Tuple& Tuple::append(const Bytes& b) {
  room_for_one(elements_).emplace_back(b);
  return *this;
}
Tuple& Tuple::append(std::string_view s) {
  room_for_one(elements_).emplace_back(std::in_place_type<std::string>, s);
  return *this;
}
Tuple& Tuple::append(const std::string& s) {
  room_for_one(elements_).emplace_back(std::in_place_type<std::string>, s);
  return *this;
}
Tuple& Tuple::append(const char* s) { return append(std::string_view(s)); }
Tuple& Tuple::append(bool b) {
  room_for_one(elements_).emplace_back(b);
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
  room_for_one(elements_).emplace_back(std::in_place_type<std::int64_t>, v);
  return *this;
}
Tuple& Tuple::append(unsigned long long v) {
  if (v <= static_cast<unsigned long long>(std::numeric_limits<std::int64_t>::max())) {
    room_for_one(elements_).emplace_back(std::in_place_type<std::int64_t>,
                                         static_cast<std::int64_t>(v));
  } else {
    room_for_one(elements_).emplace_back(std::in_place_type<std::uint64_t>, v);
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
      room_for_one(elements_).emplace_back(std::in_place_type<std::int64_t>,
                                           static_cast<std::int64_t>(std::uint64_t{0} - mag));
      return *this;
    }
  }
  room_for_one(elements_).emplace_back(BigInt{v.negative, std::string(m)});
  return *this;
}
Tuple& Tuple::append(float v) {
  room_for_one(elements_).emplace_back(v);
  return *this;
}
Tuple& Tuple::append(double v) {
  room_for_one(elements_).emplace_back(v);
  return *this;
}
Tuple& Tuple::append(const Uuid& v) {
  room_for_one(elements_).emplace_back(v);
  return *this;
}
Tuple& Tuple::append(const Versionstamp& v) {
  room_for_one(elements_).emplace_back(v);
  return *this;
}
Tuple& Tuple::append(const Tuple& nested) {
  room_for_one(elements_).emplace_back(std::in_place_type<Tuple>, nested);
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
  out.reserve(out.size() + tuple_codec::EstimateSize(elements_));
  tuple_codec::EncodeElements(out, elements_, /*allow_incomplete=*/false);
}

std::string Tuple::pack() const {
  std::string out;
  pack_into(out);
  return out;
}

std::string Tuple::pack_with_versionstamp(std::string_view prefix) const {
  std::string out;
  out.reserve(prefix.size() + tuple_codec::EstimateSize(elements_) + 4);
  out.append(prefix);
  const tuple_codec::EncodeResult encoded =
      tuple_codec::EncodeElements(out, elements_, /*allow_incomplete=*/true);
  if (encoded.incomplete_count != 1) {
    Fail("pack_with_versionstamp needs exactly one incomplete versionstamp, found " +
         std::to_string(encoded.incomplete_count));
  }
  const std::size_t offset = encoded.incomplete_offset;
  if (offset > std::numeric_limits<std::uint32_t>::max()) Fail("versionstamp offset beyond 2^32");
  out += common::encode_le32(static_cast<std::uint32_t>(offset));
  return out;
}

Tuple Tuple::unpack(std::string_view packed) { return TupleDecoder::Decode(packed); }

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
  tuple_codec::AppendRepr(out, elements_);
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
