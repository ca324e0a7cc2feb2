// kvq/tuple.h: FoundationDB's tuple layer, byte for byte (apple/foundationdb design/tuple.md).
//
// A Tuple is an ordered list of typed elements. pack() turns it into bytes whose lexicographic
// order is the tuple order, so tuples make good keys: ("P", 3, 7) sorts between ("P", 3) and
// ("P", 4). The bytes are exactly FoundationDB's, so any FDB binding's tuple decoder reads kvq
// keys.
//
// Example:
//   kvq::Tuple t;
//   t.append("P").append(int64_t{5}).append(kvq::Bytes("\x01\x02"));
//   std::string key = t.pack();                // "\x02P\x00\x15\x05\x01\x01\x00\xff\x02\x00"
//   kvq::Tuple back = kvq::Tuple::unpack(key);  // == t
//   back.get_int(1);                            // 5
//   back.to_string();                           // ("P", 5, b"\x01\x02")
//
// Errors: unpack of malformed bytes and typed getters of the wrong type throw kvq::Error with code
// invalid_tuple and a message saying what and at which offset.
//
// Thread safety: a Tuple is a value; const methods may be called concurrently, mutation needs
// external synchronisation. Details of the encoding and error cases: docs/tuple.md.
#ifndef KVQ_TUPLE_H_
#define KVQ_TUPLE_H_

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kvq/error.h"

namespace kvq {

// A byte string element (type code 0x01), distinct from a UTF-8 string (0x02).
struct Bytes {
  std::string data;
  Bytes() = default;
  explicit Bytes(std::string d) : data(std::move(d)) {}
  explicit Bytes(std::string_view d) : data(d) {}
  explicit Bytes(const char* d) : data(d) {}
  friend auto operator<=>(const Bytes&, const Bytes&) = default;
};

// A 128-bit UUID (type code 0x30), 16 bytes in network order.
struct Uuid {
  std::array<std::uint8_t, 16> bytes{};
  friend auto operator<=>(const Uuid&, const Uuid&) = default;
};

// A 96-bit versionstamp (type code 0x33): 10 bytes of transaction version (commit version + batch
// order) and a 2-byte user version. Incomplete while the transaction version is unknown (all 0xff
// bytes); Tuple::pack_with_versionstamp leaves a placeholder for the commit to fill.
struct Versionstamp {
  std::array<std::uint8_t, 10> tr_version{};
  std::uint16_t user_version = 0;

  // An incomplete versionstamp with the given user version.
  static Versionstamp incomplete(std::uint16_t user_version = 0);
  // A complete one from 10 bytes of transaction version (e.g. Transaction::get_versionstamp()).
  // Throws invalid_tuple if `tr_version` is not 10 bytes.
  static Versionstamp complete(std::string_view tr_version, std::uint16_t user_version = 0);
  bool is_complete() const;
  // The 12 bytes as packed.
  std::string bytes() const;
  friend auto operator<=>(const Versionstamp&, const Versionstamp&) = default;
};

class Tuple;

// An integer outside [INT64_MIN, UINT64_MAX]: sign and big-endian magnitude without leading zero
// bytes. Magnitudes of 9..255 bytes use FoundationDB's big-integer forms 0x0b / 0x1d; negatives in
// [-(2^64-1), INT64_MIN-1] are 8-byte magnitudes in the ordinary 0x0c form. Integers that fit in
// int64 or uint64 are always int64_t / uint64_t elements, never BigInt (append() normalises).
struct BigInt {
  bool negative = false;
  std::string magnitude;  // big-endian, no leading zeros, at most 255 bytes
  friend auto operator<=>(const BigInt&, const BigInt&) = default;
};

// One element of a tuple. uint64_t holds only values above INT64_MAX (others are int64_t).
using TupleElement = std::variant<std::nullptr_t, Bytes, std::string, std::int64_t, std::uint64_t,
                                  BigInt, float, double, bool, Uuid, Versionstamp, Tuple>;

class Tuple {
 public:
  Tuple() = default;

  // Appends one element and returns *this, for chaining.
  Tuple& append(std::nullptr_t);
  Tuple& append(const Bytes& b);
  // UTF-8 string; validated by pack() (invalid_tuple), as unpack() does: append bytes that may not
  // be UTF-8 as Bytes.
  Tuple& append(std::string_view s);
  Tuple& append(const std::string& s);
  Tuple& append(const char* s);
  Tuple& append(bool b);
  Tuple& append(signed char v);
  Tuple& append(unsigned char v);
  Tuple& append(short v);
  Tuple& append(unsigned short v);
  Tuple& append(int v);
  Tuple& append(unsigned int v);
  Tuple& append(long v);
  Tuple& append(unsigned long v);
  Tuple& append(long long v);
  Tuple& append(unsigned long long v);
  // Normalised: leading zero bytes dropped, a value that fits int64/uint64 is stored as such.
  // Throws invalid_tuple if the magnitude needs more than 255 bytes.
  Tuple& append(const BigInt& v);
  Tuple& append(float v);
  Tuple& append(double v);
  Tuple& append(const Uuid& v);
  Tuple& append(const Versionstamp& v);
  Tuple& append(const Tuple& nested);
  // Appends every element of `other`, flattened (not nested).
  Tuple& extend(const Tuple& other);

  // The FoundationDB encoding. Throws invalid_tuple if the tuple holds an incomplete versionstamp
  // (use pack_with_versionstamp) or a string element that is not valid UTF-8.
  std::string pack() const;
  // Appends the encoding of pack() to `out` (no allocation if `out` has room). Same throws as
  // pack(); on a throw `out` may hold part of the encoding.
  void pack_into(std::string& out) const;
  // For Transaction::set_versionstamped_key: the encoding followed by the 4-byte little-endian
  // offset of the one incomplete versionstamp's 10-byte placeholder, `prefix` prepended and
  // counted in the offset. Throws invalid_tuple unless exactly one incomplete versionstamp is in
  // the tuple (nested ones count).
  std::string pack_with_versionstamp(std::string_view prefix = {}) const;
  // Decodes FoundationDB tuple bytes. Throws invalid_tuple for malformed input (truncated data,
  // missing terminators, unknown or deprecated type codes, non-canonical integers, invalid UTF-8 in
  // strings, nesting deeper than 256). Every accepted input is canonical: packing the result gives
  // the same bytes, except that all-0xff versionstamp bytes decode as an incomplete versionstamp,
  // which pack() refuses (pack_with_versionstamp() gives the bytes back).
  static Tuple unpack(std::string_view packed);

  std::size_t size() const { return elements_.size(); }
  bool empty() const { return elements_.empty(); }
  // Element i. Throws invalid_tuple if i >= size().
  const TupleElement& operator[](std::size_t i) const;
  const std::vector<TupleElement>& elements() const { return elements_; }

  // Typed getters: throw invalid_tuple if index i is out of range or of another type.
  std::int64_t get_int(std::size_t i) const;    // int64 elements (and uint64 <= INT64_MAX: never)
  std::uint64_t get_uint(std::size_t i) const;  // non-negative int64 or uint64 elements
  std::string get_string(std::size_t i) const;  // 0x02 strings
  Bytes get_bytes(std::size_t i) const;         // 0x01 byte strings
  float get_float(std::size_t i) const;
  double get_double(std::size_t i) const;
  bool get_bool(std::size_t i) const;
  bool is_null(std::size_t i) const;
  Uuid get_uuid(std::size_t i) const;
  Versionstamp get_versionstamp(std::size_t i) const;
  Tuple get_tuple(std::size_t i) const;

  // A readable form like FoundationDB's Python repr: ("P", 3, b"\x01", 1.5, true, None).
  // One element: (1,). Strings "..." (UTF-8 kept, control bytes \xNN), byte strings b"...",
  // floats with an f suffix (1.5f), UUID("..."), Versionstamp(<20 hex digits>|incomplete, user).
  std::string to_string() const;

  // Equal iff the encodings are equal (so 0.0 != -0.0, a NaN equals a NaN with the same bits).
  friend bool operator==(const Tuple& a, const Tuple& b);
  // Tuple order: the order of the packed bytes (FoundationDB's ordering across types). Works for
  // tuples holding incomplete versionstamps too (their placeholder bytes are all 0xff).
  friend std::strong_ordering operator<=>(const Tuple& a, const Tuple& b);

 private:
  friend class TupleDecoder;  // builds elements_ in place (src/tuple/tuple_codec.h)
  std::vector<TupleElement> elements_;
};

}  // namespace kvq

#endif  // KVQ_TUPLE_H_
