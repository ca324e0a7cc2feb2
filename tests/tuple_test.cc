// Tuple layer: published FoundationDB byte vectors (design/tuple.md, the Java binding's
// TupleSerializationTest/TuplePackingTest), errors, getters, to_string, and the property test.
#include "kvq/tuple.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

#include "kvq/subspace.h"
#include "support/error_code.h"
#include "support/random_tuple.h"

namespace kvq {
namespace {

using Ints = std::initializer_list<int>;

std::string B(Ints bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}
std::string B(std::string_view head, Ints tail) { return std::string(head) + B(tail); }
std::string Rep(int byte, std::size_t n) { return std::string(n, static_cast<char>(byte)); }

std::string Hex(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
    out.push_back(' ');
  }
  return out;
}

BigInt Big(bool negative, std::string magnitude) { return BigInt{negative, std::move(magnitude)}; }

template <typename T>
Tuple T1(const T& v) {
  return Tuple().append(v);
}

// Packs `t`, checks the bytes, and checks that unpacking gives back the same elements.
void ExpectVector(const Tuple& t, const std::string& bytes) {
  EXPECT_EQ(Hex(t.pack()), Hex(bytes)) << t.to_string();
  const Tuple back = Tuple::unpack(bytes);
  EXPECT_TRUE(testing::StructurallyEqual(back, t)) << back.to_string() << " vs " << t.to_string();
}

void ExpectInvalid(const std::string& bytes, const std::string& message_part) {
  try {
    Tuple::unpack(bytes);
    ADD_FAILURE() << "unpack accepted " << Hex(bytes);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidTuple) << Hex(bytes);
    EXPECT_NE(std::string(e.what()).find(message_part), std::string::npos)
        << Hex(bytes) << ": " << e.what() << " lacks \"" << message_part << "\"";
  }
}

// --- published vectors ---------------------------------------------------------------------------

TEST(TupleVectors, EmptyTuplePacksToEmptyString) {
  EXPECT_EQ(Tuple().pack(), "");
  EXPECT_TRUE(Tuple::unpack("").empty());
}

TEST(TupleVectors, SpecTestCases) {
  ExpectVector(T1(Bytes(B("foo", {0}) + "bar")), B("\x01"
                                                   "foo",
                                                   {0x00, 0xff}) +
                                                     "bar" + B({0}));
  ExpectVector(T1(B("F", {0xc3, 0x94}) + "O" + B({0}) + "bar"),
               B({0x02, 'F', 0xc3, 0x94, 'O', 0x00, 0xff, 'b', 'a', 'r', 0x00}));
  ExpectVector(T1(Tuple().append(Bytes(B("foo", {0}) + "bar")).append(nullptr).append(Tuple())),
               B({0x05, 0x01, 'f', 'o', 'o', 0x00, 0xff, 'b', 'a', 'r', 0x00, 0x00, 0xff, 0x05,
                  0x00, 0x00}));
  ExpectVector(T1(-5551212), B({0x11, 0xab, 0x4b, 0x93}));
  ExpectVector(T1(-42.0f), B({0x20, 0x3d, 0xd7, 0xff, 0xff}));
}

TEST(TupleVectors, HeaderExample) {
  Tuple t;
  t.append("P").append(int64_t{5}).append(Bytes(B({1, 2})));
  EXPECT_EQ(t.pack(), B("\x02P", {0x00, 0x15, 0x05, 0x01, 0x01, 0x02, 0x00}));
  EXPECT_EQ(t.to_string(), "(\"P\", 5, b\"\\x01\\x02\")");
}

TEST(TupleVectors, SmallIntegers) {
  ExpectVector(T1(0), B({0x14}));
  ExpectVector(T1(1), B({0x15, 0x01}));
  ExpectVector(T1(-1), B({0x13, 0xfe}));
  ExpectVector(T1(255), B({0x15, 0xff}));
  ExpectVector(T1(-255), B({0x13, 0x00}));
  ExpectVector(T1(256), B({0x16, 0x01, 0x00}));
  ExpectVector(T1(-256), B({0x12, 0xfe, 0xff}));
  ExpectVector(T1(65535), B({0x16, 0xff, 0xff}));
  ExpectVector(T1(65536), B({0x17, 0x01, 0x00, 0x00}));
  ExpectVector(T1(-65536), B({0x11, 0xfe, 0xff, 0xff}));
  ExpectVector(T1(-((int64_t{1} << 32) - 1)), B({0x10, 0x00, 0x00, 0x00, 0x00}));
  ExpectVector(T1(static_cast<short>(0x3019)), B({0x16, 0x30, 0x19}));
  ExpectVector(T1(static_cast<signed char>(3)), B({0x15, 0x03}));
}

TEST(TupleVectors, IntegersAtEverySizeBoundary) {
  // 2^(8n)-1 is the largest n-byte value: code 0x14+n, n bytes 0xff. 2^(8n) needs n+1 bytes.
  // -(2^(8n)-1) is the smallest n-byte negative: code 0x14-n, n bytes 0x00 (one's complement).
  for (int n = 1; n <= 8; ++n) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const uint64_t max_n = n == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * n)) - 1;
    ExpectVector(T1(static_cast<unsigned long long>(max_n)), B({0x14 + n}) + Rep(0xff, n));
    ExpectVector(T1(Big(true, std::string(8 - n, '\0') + Rep(0xff, n))),
                 B({0x14 - n}) + Rep(0x00, n));
    if (n < 8) {
      ExpectVector(T1(static_cast<long long>(max_n + 1)), B({0x14 + n + 1, 0x01}) + Rep(0x00, n));
      ExpectVector(T1(-static_cast<long long>(max_n + 1)), B({0x14 - n - 1, 0xfe}) + Rep(0xff, n));
    }
  }
}

TEST(TupleVectors, Int64AndUint64Limits) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  ExpectVector(T1(kMax), B({0x1c, 0x7f}) + Rep(0xff, 7));
  ExpectVector(T1(kMin), B({0x0c, 0x7f}) + Rep(0xff, 7));
  ExpectVector(T1(kMin + 1), B({0x0c, 0x80}) + Rep(0x00, 7));
  ExpectVector(T1(kMin + 2), B({0x0c, 0x80, 0, 0, 0, 0, 0, 0, 0x01}));
  ExpectVector(T1(uint64_t{1} << 63), B({0x1c, 0x80}) + Rep(0x00, 7));
  ExpectVector(T1(std::numeric_limits<uint64_t>::max()), B({0x1c}) + Rep(0xff, 8));
  // INT64_MIN - 1 and -(2^64-1): 8-byte negatives outside int64 (held as BigInt).
  ExpectVector(T1(Big(true, B({0x80, 0, 0, 0, 0, 0, 0, 0x01}))),
               B({0x0c, 0x7f}) + Rep(0xff, 6) + B({0xfe}));
  ExpectVector(T1(Big(true, Rep(0xff, 8))), B({0x0c}) + Rep(0x00, 8));
}

TEST(TupleVectors, IntegersBeyond64Bits) {
  // 2^64 and -2^64: the 0x1d / 0x0b forms with a length byte (flipped for negatives).
  ExpectVector(T1(Big(false, B({1}) + Rep(0, 8))), B({0x1d, 0x09, 0x01}) + Rep(0x00, 8));
  ExpectVector(T1(Big(true, B({1}) + Rep(0, 8))), B({0x0b, 0xf6, 0xfe}) + Rep(0xff, 8));
  // 2^64+1 and -(2^64+1).
  ExpectVector(T1(Big(false, B({1}) + Rep(0, 7) + B({1}))),
               B({0x1d, 0x09, 0x01}) + Rep(0, 7) + B({1}));
  ExpectVector(T1(Big(true, B({1}) + Rep(0, 7) + B({1}))),
               B({0x0b, 0xf6, 0xfe}) + Rep(0xff, 7) + B({0xfe}));
  // 2^65 and -2^65 (Java TuplePackingTest well-formed sequences).
  ExpectVector(T1(Big(false, B({2}) + Rep(0, 8))), B({0x1d, 0x09, 0x02}) + Rep(0x00, 8));
  ExpectVector(T1(Big(true, B({2}) + Rep(0, 8))), B({0x0b, 0xf6, 0xfd}) + Rep(0xff, 8));
  // The largest magnitudes: 255 bytes.
  ExpectVector(T1(Big(false, Rep(0xff, 255))), B({0x1d, 0xff}) + Rep(0xff, 255));
  ExpectVector(T1(Big(true, Rep(0xff, 255))), B({0x0b, 0x00}) + Rep(0x00, 255));
}

TEST(TupleVectors, BigIntIsNormalisedToFixedWidthWhenItFits) {
  EXPECT_TRUE(std::holds_alternative<int64_t>(T1(Big(false, B({0, 0, 5})))[0]));
  EXPECT_EQ(T1(Big(false, B({0, 0, 5}))).get_int(0), 5);
  EXPECT_EQ(T1(Big(true, B({0x80, 0, 0, 0, 0, 0, 0, 0}))).get_int(0),
            std::numeric_limits<int64_t>::min());
  EXPECT_TRUE(std::holds_alternative<uint64_t>(T1(Big(false, Rep(0xff, 8)))[0]));
  EXPECT_TRUE(std::holds_alternative<int64_t>(T1(Big(true, ""))[0]));
  EXPECT_EQ(T1(Big(true, Rep(0, 3))).pack(), B({0x14}));
  EXPECT_EQ(T1(Big(false, Rep(0, 4) + B({1}) + Rep(0, 8))), T1(Big(false, B({1}) + Rep(0, 8))));
  EXPECT_EQ(T1(uint64_t{7}), T1(7));
  EXPECT_TRUE(std::holds_alternative<int64_t>(T1(uint64_t{7})[0]));
}

TEST(TupleVectors, BigIntLongerThan255BytesIsRejected) {
  try {
    T1(Big(false, Rep(0xff, 256)));
    FAIL() << "accepted a 256-byte magnitude";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidTuple);
  }
}

TEST(TupleVectors, Floats) {
  ExpectVector(T1(3.14f), B({0x20, 0xc0, 0x48, 0xf5, 0xc3}));
  ExpectVector(T1(-3.14f), B({0x20, 0x3f, 0xb7, 0x0a, 0x3c}));
  ExpectVector(T1(0.0f), B({0x20, 0x80, 0x00, 0x00, 0x00}));
  ExpectVector(T1(-0.0f), B({0x20, 0x7f, 0xff, 0xff, 0xff}));
  ExpectVector(T1(std::numeric_limits<float>::infinity()), B({0x20, 0xff, 0x80, 0x00, 0x00}));
  ExpectVector(T1(-std::numeric_limits<float>::infinity()), B({0x20, 0x00, 0x7f, 0xff, 0xff}));
  ExpectVector(T1(std::numeric_limits<float>::quiet_NaN()), B({0x20, 0xff, 0xc0, 0x00, 0x00}));
  ExpectVector(T1(std::bit_cast<float>(uint32_t{0x7fffffff})), B({0x20, 0xff, 0xff, 0xff, 0xff}));
  ExpectVector(T1(std::bit_cast<float>(~uint32_t{0})), B({0x20, 0x00, 0x00, 0x00, 0x00}));
}

TEST(TupleVectors, Doubles) {
  ExpectVector(T1(3.14), B({0x21, 0xc0, 0x09, 0x1e, 0xb8, 0x51, 0xeb, 0x85, 0x1f}));
  ExpectVector(T1(-3.14), B({0x21, 0x3f, 0xf6, 0xe1, 0x47, 0xae, 0x14, 0x7a, 0xe0}));
  ExpectVector(T1(0.0), B({0x21, 0x80}) + Rep(0x00, 7));
  ExpectVector(T1(-0.0), B({0x21, 0x7f}) + Rep(0xff, 7));
  ExpectVector(T1(std::numeric_limits<double>::infinity()), B({0x21, 0xff, 0xf0}) + Rep(0x00, 6));
  ExpectVector(T1(-std::numeric_limits<double>::infinity()), B({0x21, 0x00, 0x0f}) + Rep(0xff, 6));
  ExpectVector(T1(std::numeric_limits<double>::quiet_NaN()), B({0x21, 0xff, 0xf8}) + Rep(0x00, 6));
  ExpectVector(T1(std::bit_cast<double>(~uint64_t{0} >> 1)), B({0x21}) + Rep(0xff, 8));
  ExpectVector(T1(std::bit_cast<double>(~uint64_t{0})), B({0x21}) + Rep(0x00, 8));
}

TEST(TupleVectors, ByteStringsAndStrings) {
  ExpectVector(T1(Bytes("")), B({0x01, 0x00}));
  ExpectVector(T1(Bytes(B({1, 2, 3}))), B({0x01, 0x01, 0x02, 0x03, 0x00}));
  ExpectVector(T1(Bytes(B({0, 0, 0, 4}))),
               B({0x01, 0x00, 0xff, 0x00, 0xff, 0x00, 0xff, 0x04, 0x00}));
  ExpectVector(T1(""), B({0x02, 0x00}));
  ExpectVector(T1("hello"), B("\x02hello", {0x00}));
  ExpectVector(T1(std::string("hell\0", 5)), B("\x02hell", {0x00, 0xff, 0x00}));
  ExpectVector(T1(B({0xe4, 0xb8, 0xad, 0xe6, 0x96, 0x87})),
               B({0x02, 0xe4, 0xb8, 0xad, 0xe6, 0x96, 0x87, 0x00}));  // two CJK code points
  ExpectVector(T1(B({0xf0, 0x9f, 0x94, 0xa5})),
               B({0x02, 0xf0, 0x9f, 0x94, 0xa5, 0x00}));  // U+1F525
  ExpectVector(T1(B({0xf4, 0x8f, 0xbf, 0xbf})),
               B({0x02, 0xf4, 0x8f, 0xbf, 0xbf, 0x00}));  // U+10FFFF
  // Byte string and string are different types even with equal content.
  EXPECT_NE(T1(Bytes("a")), T1("a"));
}

TEST(TupleVectors, NullsTopLevelAndNested) {
  ExpectVector(T1(nullptr), B({0x00}));
  ExpectVector(Tuple().append(nullptr).append(nullptr), B({0x00, 0x00}));
  ExpectVector(T1(T1(nullptr)), B({0x05, 0x00, 0xff, 0x00}));
  ExpectVector(T1(Tuple().append(nullptr).append("hello")),
               B({0x05, 0x00, 0xff, 0x02, 'h', 'e', 'l', 'l', 'o', 0x00, 0x00}));
  ExpectVector(T1(Tuple().append(nullptr).append(std::string("hell\0", 5))),
               B({0x05, 0x00, 0xff, 0x02, 'h', 'e', 'l', 'l', 0x00, 0xff, 0x00, 0x00}));
  ExpectVector(Tuple().append(T1(nullptr)).append("hello"),
               B({0x05, 0x00, 0xff, 0x00, 0x02, 'h', 'e', 'l', 'l', 'o', 0x00}));
  ExpectVector(
      Tuple().append(T1(nullptr)).append("hello").append(Bytes(B({1, 0}))).append(Bytes("")),
      B({0x05, 0x00, 0xff, 0x00, 0x02, 'h', 'e', 'l', 'l', 'o', 0x00, 0x01, 0x01, 0x00, 0xff, 0x00,
         0x01, 0x00}));
  ExpectVector(T1(Tuple()), B({0x05, 0x00}));
  ExpectVector(T1(T1(T1(nullptr))), B({0x05, 0x05, 0x00, 0xff, 0x00, 0x00}));
}

TEST(TupleVectors, BoolsAndUuids) {
  ExpectVector(T1(false), B({0x26}));
  ExpectVector(T1(true), B({0x27}));
  Uuid u;  // Java: new UUID(0xba5eba11, 0x5ca1ab1e) (the int literal sign-extends)
  const std::string ub =
      B({0xff, 0xff, 0xff, 0xff, 0xba, 0x5e, 0xba, 0x11, 0, 0, 0, 0, 0x5c, 0xa1, 0xab, 0x1e});
  std::copy(ub.begin(), ub.end(), u.bytes.begin());
  ExpectVector(T1(u), B({0x30}) + ub);
}

TEST(TupleVectors, CompleteVersionstamps) {
  ExpectVector(
      T1(Versionstamp::complete(B({0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00, 0x01, 0x02, 0x03}))),
      B({0x33, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00, 0x01, 0x02, 0x03, 0x00, 0x00}));
  ExpectVector(T1(Versionstamp::complete(B({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}), 657)),
               B({0x33, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0x02, 0x91}));
  const Versionstamp v = Versionstamp::complete(B({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}), 657);
  EXPECT_TRUE(v.is_complete());
  EXPECT_EQ(v.bytes(), B({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0x02, 0x91}));
  EXPECT_EQ(T1(v).get_versionstamp(0), v);
}

TEST(TupleVectors, VersionstampCompleteRejectsWrongLength) {
  EXPECT_THROW(Versionstamp::complete("123456789"), Error);
  EXPECT_THROW(Versionstamp::complete("12345678901"), Error);
}

TEST(TupleVectors, IncompleteVersionstampIsAllOnesAndCannotBePlainPacked) {
  const Versionstamp v = Versionstamp::incomplete(5);
  EXPECT_FALSE(v.is_complete());
  EXPECT_EQ(v.bytes(), Rep(0xff, 10) + B({0x00, 0x05}));
  try {
    T1(v).pack();
    FAIL() << "pack accepted an incomplete versionstamp";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidTuple);
  }
  EXPECT_THROW(T1(T1(v)).pack(), Error);  // nested counts too
  // Unpacking all-0xff bytes gives an incomplete versionstamp back.
  EXPECT_FALSE(Tuple::unpack(B({0x33}) + v.bytes()).get_versionstamp(0).is_complete());
}

TEST(TupleVectors, PackWithVersionstampAppendsLittleEndianOffsetOfPlaceholder) {
  const Versionstamp v = Versionstamp::incomplete(5);
  // Placeholder right after the 0x33 code: offset 1.
  EXPECT_EQ(Hex(T1(v).pack_with_versionstamp()),
            Hex(B({0x33}) + Rep(0xff, 10) + B({0x00, 0x05, 0x01, 0x00, 0x00, 0x00})));
  // ("a", vs) after prefix "PP": 2 + 3 (\x02a\x00) + 1 = 6.
  EXPECT_EQ(Hex(Tuple().append("a").append(v).pack_with_versionstamp("PP")),
            Hex(B("PP\x02"
                  "a",
                  {0x00, 0x33}) +
                Rep(0xff, 10) + B({0x00, 0x05, 0x06, 0x00, 0x00, 0x00})));
  // Nested: (("x", vs), 1) -> 0x05 0x02 x 0x00 0x33 [10] [2] 0x00 0x15 0x01; offset 5.
  EXPECT_EQ(Hex(Tuple().append(Tuple().append("x").append(v)).append(1).pack_with_versionstamp()),
            Hex(B({0x05, 0x02, 'x', 0x00, 0x33}) + Rep(0xff, 10) +
                B({0x00, 0x05, 0x00, 0x15, 0x01, 0x05, 0x00, 0x00, 0x00})));
  // An offset beyond 255 uses the higher little-endian bytes.
  const std::string prefix(300, 'p');
  const std::string packed = T1(v).pack_with_versionstamp(prefix);
  EXPECT_EQ(packed.substr(packed.size() - 4), B({0x2d, 0x01, 0x00, 0x00}));  // 301
}

TEST(TupleVectors, PackWithVersionstampNeedsExactlyOneIncomplete) {
  const Versionstamp v = Versionstamp::incomplete();
  const Versionstamp c = Versionstamp::complete(Rep(0, 10));
  EXPECT_THROW(Tuple().append(1).pack_with_versionstamp(), Error);
  EXPECT_THROW(T1(c).pack_with_versionstamp(), Error);
  EXPECT_THROW(Tuple().append(v).append(v).pack_with_versionstamp(), Error);
  EXPECT_THROW(Tuple().append(T1(v)).append(T1(v)).pack_with_versionstamp(), Error);
  EXPECT_NO_THROW(Tuple().append(c).append(v).pack_with_versionstamp());
}

// --- malformed input -----------------------------------------------------------------------------

TEST(TupleDecoding, RejectsTheJavaBindingsMalformedSequences) {
  ExpectInvalid(B({0x01, 0xde, 0xad, 0xc0, 0xde}), "byte string without terminator");
  ExpectInvalid(B({0x01, 0xde, 0xad, 0x00, 0xff, 0xc0, 0xde}), "without terminator");
  ExpectInvalid(B("\x02hello", {}), "string without terminator (started) at offset 0");
  ExpectInvalid(B({0x02, 'h', 'e', 'l', 0x00, 0xff, 'l', 'o'}), "without terminator");
  ExpectInvalid(B({0x02, 'u', 't', 'f', 0x08, 0x80, 0x00}), "invalid UTF-8 in string at offset 5");
  ExpectInvalid(B({0x02, 'u', 't', 'f', 0x08, 0xc0, 0x01, 0x00}), "invalid UTF-8");
  ExpectInvalid(B({0x02, 'u', 't', 'f', 0x10, 0xed, 0xa0, 0xbd, 0x00}),
                "invalid UTF-8");  // surrogate
  ExpectInvalid(B({0x02, 'u', 't', 'f', 0x10, 0xed, 0xb4, 0xa5, 0x00}), "invalid UTF-8");
  ExpectInvalid(B({0x02, 'u', 't', 'f', 0x10, 0xed, 0xa0, 0xbd, 0xed, 0xb4, 0xa5, 0x00}),
                "invalid UTF-8");
  ExpectInvalid(B("\x05\x02hello", {0x00}),
                "nested tuple without terminator (started) at offset 0");
  ExpectInvalid(B("\x05\x02hello", {0x00, 0x00, 0xff, 0x02, 't', 'h', 'e', 'r', 'e', 0x00}),
                "nested tuple without terminator");
  ExpectInvalid(B({0x16, 0x01}), "truncated integer at offset 0");
  ExpectInvalid(B({0x12, 0x01}), "truncated integer");
  ExpectInvalid(B({0x1d, 0x09, 1, 2, 3, 4, 5, 6, 7, 8}), "truncated integer");
  ExpectInvalid(B({0x0b, 0x09 ^ 0xff, 1, 2, 3, 4, 5, 6, 7, 8}), "truncated integer");
  ExpectInvalid(B({0x20, 1, 2, 3}), "truncated float");
  ExpectInvalid(B({0x21, 1, 2, 3, 4, 5, 6, 7}), "truncated double");
  ExpectInvalid(B({0x30, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}), "truncated UUID");
  ExpectInvalid(B({0x33, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}), "truncated versionstamp");
  ExpectInvalid(B({0xff}), "unknown type code 0xff at offset 0");
}

TEST(TupleDecoding, ErrorOffsetsPointIntoTheWholeInput) {
  ExpectInvalid(B({0x15, 0x01, 0x16, 0x01}), "truncated integer at offset 2");
  ExpectInvalid(B({0x00, 0xff}), "unknown type code 0xff at offset 1");
  ExpectInvalid(B({0x05, 0x15, 0x01, 0x30, 0x01}), "truncated UUID at offset 3");
  // The bad UTF-8 byte is at input offset 7: 02 'a' 00 ff 'b' 00 ff [c3] 00.
  ExpectInvalid(B({0x02, 'a', 0x00, 0xff, 'b', 0x00, 0xff, 0xc3, 0x00}),
                "invalid UTF-8 in string at offset 7");
}

TEST(TupleDecoding, RejectsUnknownAndDeprecatedTypeCodes) {
  for (int code : {0x03, 0x04, 0x06, 0x0a, 0x1e, 0x22, 0x23, 0x25, 0x28, 0x31, 0x32, 0x40, 0xfe}) {
    ExpectInvalid(B({code}), "unknown type code");
  }
}

TEST(TupleDecoding, RejectsNonCanonicalIntegers) {
  ExpectInvalid(B({0x15, 0x00}), "non-canonical integer");                     // 0 as one byte
  ExpectInvalid(B({0x16, 0x00, 0x05}), "non-canonical integer");               // 5 as two bytes
  ExpectInvalid(B({0x13, 0xff}), "non-canonical integer");                     // -0
  ExpectInvalid(B({0x12, 0xff, 0xfa}), "non-canonical integer");               // -5 as two bytes
  ExpectInvalid(B({0x1d, 0x08}) + Rep(0xff, 8), "non-canonical big integer");  // 2^64-1 long form
  ExpectInvalid(B({0x0b, 0xf7}) + Rep(0x00, 8),
                "non-canonical big integer");  // -(2^64-1) long form
  ExpectInvalid(B({0x1d, 0x09, 0x00}) + Rep(0xff, 8), "non-canonical integer");
  ExpectInvalid(B({0x0b, 0xf6, 0xff}) + Rep(0x00, 8), "non-canonical integer");
  ExpectInvalid(B({0x1d}), "truncated integer");
  ExpectInvalid(B({0x0b}), "truncated integer");
}

TEST(TupleDecoding, RejectsOverlongAndOutOfRangeUtf8) {
  ExpectInvalid(B({0x02, 0xc0, 0x80, 0x00}), "invalid UTF-8");              // overlong NUL
  ExpectInvalid(B({0x02, 0xe0, 0x80, 0x80, 0x00}), "invalid UTF-8");        // overlong
  ExpectInvalid(B({0x02, 0xf0, 0x80, 0x80, 0x80, 0x00}), "invalid UTF-8");  // overlong
  ExpectInvalid(B({0x02, 0xf4, 0x90, 0x80, 0x80, 0x00}), "invalid UTF-8");  // > U+10FFFF
  ExpectInvalid(B({0x02, 0xf5, 0x80, 0x80, 0x80, 0x00}), "invalid UTF-8");
  ExpectInvalid(B({0x02, 0xe4, 0xb8, 0x00}), "invalid UTF-8");  // cut short
  // Byte strings are not checked.
  EXPECT_EQ(Tuple::unpack(B({0x01, 0xc0, 0x80, 0x00})).get_bytes(0).data, B({0xc0, 0x80}));
}

// pack() refuses what unpack() refuses: a string element that is not UTF-8 (also nested), so
// that kvq never writes a key it cannot read back (a CLI --name of byte 0xff did, which dump then
// could not decode). Such bytes go in as Bytes; comparing tuples still works.
TEST(TupleEncoding, PackRefusesAStringElementThatIsNotUtf8) {
  const std::string not_utf8 = "ok\xff";
  EXPECT_EQ(testing::code_of([&] { Tuple().append(not_utf8).pack(); }), ErrorCode::kInvalidTuple);
  EXPECT_EQ(testing::code_of([&] { Tuple().append(Tuple().append(not_utf8)).pack(); }),
            ErrorCode::kInvalidTuple);
  EXPECT_EQ(testing::code_of([&] { Subspace(Tuple().append(not_utf8)); }),
            ErrorCode::kInvalidTuple);
  EXPECT_EQ(Tuple::unpack(Tuple().append(Bytes(not_utf8)).pack()).get_bytes(0).data, not_utf8);
  EXPECT_TRUE(Tuple().append(not_utf8) != Tuple().append(std::string("ok")));
}

TEST(TupleDecoding, RejectsNestingDeeperThan256) {
  std::string ok = Rep(0x05, 256) + Rep(0x00, 256);
  EXPECT_EQ(Tuple::unpack(ok).size(), 1u);
  ExpectInvalid(Rep(0x05, 257) + Rep(0x00, 257), "deeper than 256");
  ExpectInvalid(Rep(0x05, 100000), "deeper than 256");
}

// --- access and printing -------------------------------------------------------------------------

TEST(TupleAccess, TypedGettersReturnValuesAndRejectOtherTypes) {
  Uuid u;
  u.bytes[15] = 7;
  const Tuple t = Tuple()
                      .append(-3)
                      .append(std::numeric_limits<uint64_t>::max())
                      .append("s")
                      .append(Bytes("b"))
                      .append(1.5f)
                      .append(2.5)
                      .append(true)
                      .append(nullptr)
                      .append(u)
                      .append(T1(1))
                      .append(9);
  EXPECT_EQ(t.size(), 11u);
  EXPECT_EQ(t.get_int(0), -3);
  EXPECT_EQ(t.get_uint(1), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(t.get_string(2), "s");
  EXPECT_EQ(t.get_bytes(3).data, "b");
  EXPECT_EQ(t.get_float(4), 1.5f);
  EXPECT_EQ(t.get_double(5), 2.5);
  EXPECT_TRUE(t.get_bool(6));
  EXPECT_TRUE(t.is_null(7));
  EXPECT_FALSE(t.is_null(6));
  EXPECT_EQ(t.get_uuid(8), u);
  EXPECT_EQ(t.get_tuple(9), T1(1));
  EXPECT_EQ(t.get_uint(10), 9u);

  auto expect_invalid = [](auto fn) {
    try {
      fn();
      ADD_FAILURE() << "getter did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidTuple);
    }
  };
  expect_invalid([&] { t.get_int(1); });   // uint64 above INT64_MAX
  expect_invalid([&] { t.get_uint(0); });  // negative
  expect_invalid([&] { t.get_string(3); });
  expect_invalid([&] { t.get_bytes(2); });
  expect_invalid([&] { t.get_float(5); });
  expect_invalid([&] { t.get_double(4); });
  expect_invalid([&] { t.get_bool(7); });
  expect_invalid([&] { t.get_uuid(0); });
  expect_invalid([&] { t.get_versionstamp(0); });
  expect_invalid([&] { t.get_tuple(0); });
  expect_invalid([&] { t.get_int(11); });
  expect_invalid([&] { t.is_null(11); });
  expect_invalid([&] { (void)t[11]; });
}

TEST(TupleAccess, ExtendFlattensAndAppendNests) {
  Tuple a = Tuple().append(1).append(2);
  const Tuple b = Tuple().append("x");
  Tuple nested = a;
  nested.append(b);
  a.extend(b);
  EXPECT_EQ(a, Tuple().append(1).append(2).append("x"));
  EXPECT_EQ(nested.size(), 3u);
  EXPECT_EQ(nested.get_tuple(2), b);
  a.extend(a);
  EXPECT_EQ(a.size(), 6u);
  EXPECT_EQ(a.pack(), Tuple().append(1).append(2).append("x").pack() +
                          Tuple().append(1).append(2).append("x").pack());
}

TEST(TupleAccess, PackIntoAppendsToExistingBytes) {
  std::string out = "pre";
  Tuple().append(1).pack_into(out);
  EXPECT_EQ(out, B("pre", {0x15, 0x01}));
}

TEST(TupleToString, MatchesPythonLikeRepr) {
  EXPECT_EQ(Tuple()
                .append("P")
                .append(3)
                .append(Bytes(B({1})))
                .append(1.5)
                .append(true)
                .append(nullptr)
                .to_string(),
            "(\"P\", 3, b\"\\x01\", 1.5, true, None)");
  EXPECT_EQ(Tuple().to_string(), "()");
  EXPECT_EQ(T1(1).to_string(), "(1,)");
  EXPECT_EQ(T1(T1(1)).append(false).to_string(), "((1,), false)");
  EXPECT_EQ(T1(std::string("a\"\\\n\0", 5)).to_string(), "(\"a\\\"\\\\\\x0a\\x00\",)");
  EXPECT_EQ(T1(B({0xc3, 0x94})).to_string(), "(\"\xc3\x94\",)");  // UTF-8 kept
  EXPECT_EQ(T1(Bytes(B({0xc3, 'a'}))).to_string(), "(b\"\\xc3a\",)");
  EXPECT_EQ(T1(2.0).to_string(), "(2.0,)");
  EXPECT_EQ(T1(1.5f).to_string(), "(1.5f,)");
  EXPECT_EQ(T1(-0.0).to_string(), "(-0.0,)");
  EXPECT_EQ(T1(std::numeric_limits<double>::infinity()).to_string(), "(inf,)");
  EXPECT_EQ(T1(std::numeric_limits<double>::quiet_NaN()).to_string(), "(nan,)");
  EXPECT_EQ(T1(1e300).to_string(), "(1e+300,)");
  EXPECT_EQ(T1(std::numeric_limits<int64_t>::min()).to_string(), "(-9223372036854775808,)");
  EXPECT_EQ(T1(std::numeric_limits<uint64_t>::max()).to_string(), "(18446744073709551615,)");
  EXPECT_EQ(T1(Big(false, B({1}) + Rep(0, 8))).to_string(), "(18446744073709551616,)");
  EXPECT_EQ(T1(Big(true, B({1}) + Rep(0, 8))).to_string(), "(-18446744073709551616,)");
  EXPECT_EQ(T1(Big(true, Rep(0xff, 8))).to_string(), "(-18446744073709551615,)");
  Uuid u;
  for (int i = 0; i < 16; ++i) u.bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(i * 17);
  EXPECT_EQ(T1(u).to_string(), "(UUID(\"00112233-4455-6677-8899-aabbccddeeff\"),)");
  EXPECT_EQ(T1(Versionstamp::complete(B({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}), 657)).to_string(),
            "(Versionstamp(0102030405060708090a, 657),)");
  EXPECT_EQ(T1(Versionstamp::incomplete(3)).to_string(), "(Versionstamp(incomplete, 3),)");
}

// --- ordering ------------------------------------------------------------------------------------

TEST(TupleOrder, FollowsTypeCodesThenValues) {
  const Uuid u{};
  const std::vector<Tuple> sorted = {
      Tuple(),
      T1(nullptr),
      T1(Bytes("")),
      T1(Bytes(B({0}))),
      T1(Bytes("a")),
      T1(""),
      T1("a"),
      T1(std::string("a\0", 2)),
      T1("b"),
      T1(Tuple()),
      T1(T1(nullptr)),
      T1(T1(1)),
      T1(Big(true, B({1}) + Rep(0, 8))),  // -2^64
      T1(Big(true, Rep(0xff, 8))),        // -(2^64-1)
      T1(std::numeric_limits<int64_t>::min()),
      T1(-256),
      T1(-1),
      T1(0),
      T1(1),
      T1(std::numeric_limits<int64_t>::max()),
      T1(std::numeric_limits<uint64_t>::max()),
      T1(Big(false, B({1}) + Rep(0, 8))),  // 2^64
      T1(-std::numeric_limits<float>::quiet_NaN()),
      T1(-std::numeric_limits<float>::infinity()),
      T1(-0.0f),
      T1(0.0f),
      T1(std::numeric_limits<float>::infinity()),
      T1(std::numeric_limits<float>::quiet_NaN()),
      T1(-std::numeric_limits<double>::quiet_NaN()),
      T1(-1e300),
      T1(-0.0),
      T1(0.0),
      T1(std::numeric_limits<double>::quiet_NaN()),
      T1(false),
      T1(true),
      T1(u),
      T1(Versionstamp::complete(Rep(0, 10))),
  };
  for (size_t i = 0; i < sorted.size(); ++i) {
    for (size_t j = 0; j < sorted.size(); ++j) {
      EXPECT_EQ((sorted[i] <=> sorted[j]), (i <=> j))
          << sorted[i].to_string() << " vs " << sorted[j].to_string();
      EXPECT_EQ(sorted[i].pack().compare(sorted[j].pack()) < 0, i < j);
    }
  }
}

TEST(TupleOrder, PrefixSortsFirstAndNestedNullSortsBeforeEnd) {
  EXPECT_LT(Tuple().append("P").append(3), Tuple().append("P").append(3).append(7));
  EXPECT_LT(Tuple().append("P").append(3).append(7), Tuple().append("P").append(4));
  EXPECT_LT(T1(Tuple()), T1(T1(nullptr)));
  EXPECT_LT(Tuple().append(T1(1)).append(5),
            Tuple().append(Tuple().append(1).append(nullptr)).append(0));
}

TEST(TupleOrder, EqualityIsEncodingEquality) {
  EXPECT_NE(T1(0.0), T1(-0.0));
  EXPECT_EQ(T1(std::numeric_limits<double>::quiet_NaN()),
            T1(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_NE(T1(1.0f), T1(1.0));
  EXPECT_NE(T1(1), T1(true));
  EXPECT_EQ(T1(Versionstamp::incomplete(1)), T1(Versionstamp::incomplete(1)));
  EXPECT_LT(T1(Versionstamp::incomplete(1)), T1(Versionstamp::incomplete(2)));
}

// --- property test -------------------------------------------------------------------------------

TEST(TupleProperty, UnpackOfPackIsIdentityForRandomTuples) {
  testing::RandomTuples gen(20261121);
  for (int i = 0; i < 20000; ++i) {
    const Tuple t = gen.Make();
    const std::string packed = t.pack();
    const Tuple back = Tuple::unpack(packed);
    ASSERT_TRUE(testing::StructurallyEqual(back, t)) << t.to_string() << " -> " << back.to_string();
    ASSERT_EQ(back, t);
    ASSERT_EQ(back.pack(), packed);
    // The same tuple behind a raw prefix decodes the same after the prefix is cut off.
    ASSERT_EQ(Tuple::unpack(std::string_view("\x15\x01" + packed).substr(2)), t);
  }
}

int Sign(int c) { return (c > 0) - (c < 0); }
int Sign(std::strong_ordering o) { return o < 0 ? -1 : o > 0 ? 1 : 0; }

TEST(TupleProperty, TupleOrderEqualsPackedByteOrder) {
  testing::RandomTuples gen(42);
  int less = 0, equal = 0, greater = 0;
  for (int i = 0; i < 30000; ++i) {
    Tuple a = gen.Make(2, 4);
    Tuple b;
    switch (gen.Uniform(4)) {
      case 0:
        b = gen.Make(2, 4);
        break;
      case 1:
        b = a;
        break;   // equal
      case 2: {  // a prefix of a, then random elements
        const size_t keep = gen.Uniform(a.size() + 1);
        for (size_t k = 0; k < keep; ++k) std::visit([&](const auto& v) { b.append(v); }, a[k]);
        const uint64_t extra = gen.Uniform(3);
        for (uint64_t k = 0; k < extra; ++k) gen.AppendRandom(b, 1);
        break;
      }
      default: {  // same elements but one nested level differs
        b = Tuple().append(a);
        a = Tuple().append(gen.Make(1, 3));
        break;
      }
    }
    const int by_tuple = Sign(a <=> b);
    const int by_bytes = Sign(a.pack().compare(b.pack()));
    ASSERT_EQ(by_tuple, by_bytes) << a.to_string() << " vs " << b.to_string();
    ASSERT_EQ(a == b, by_bytes == 0);
    (by_bytes < 0 ? less : by_bytes == 0 ? equal : greater)++;
  }
  EXPECT_GT(less, 1000);
  EXPECT_GT(equal, 1000);
  EXPECT_GT(greater, 1000);
}

}  // namespace
}  // namespace kvq
