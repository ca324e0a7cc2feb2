// Subspace: prefixes, pack/unpack, contains, range, nested subspaces, foreign keys.
#include "kvq/subspace.h"

#include <gtest/gtest.h>

#include <string>

namespace kvq {
namespace {

std::string B(std::string_view head, std::initializer_list<int> tail = {}) {
  std::string s(head);
  for (int b : tail) s.push_back(static_cast<char>(b));
  return s;
}

TEST(Subspace, DefaultIsTheWholeKeySpace) {
  const Subspace all;
  EXPECT_EQ(all.key(), "");
  EXPECT_TRUE(all.contains(""));
  EXPECT_TRUE(all.contains("\xff"));
  EXPECT_EQ(all.pack(Tuple().append(1)), B("\x15\x01"));
  EXPECT_EQ(all.range(), (KeyRange{B("", {0x00}), B("\xff")}));
}

TEST(Subspace, PrefixIsTheRawPrefixFollowedByThePackedTuple) {
  const Subspace pq(Tuple().append("P"));
  EXPECT_EQ(pq.key(), B("\x02P", {0x00}));
  const Subspace raw_and_tuple(Tuple().append(1), "raw");
  EXPECT_EQ(raw_and_tuple.key(), B("raw\x15\x01"));
  EXPECT_EQ(Subspace::from_raw_prefix("abc").key(), "abc");
  EXPECT_EQ(Subspace::from_raw_prefix(B("\x02P", {0x00})), pq);
}

TEST(Subspace, PackAndUnpackRoundTrip) {
  const Subspace pq(Tuple().append("P"));
  const Tuple t = Tuple().append(5).append(0);
  const std::string key = pq.pack(t);
  EXPECT_EQ(key, B("\x02P", {0x00, 0x15, 0x05, 0x14}));
  EXPECT_EQ(pq.unpack(key), t);
  EXPECT_EQ(pq.pack(), pq.key());
  EXPECT_TRUE(pq.unpack(pq.key()).empty());
}

TEST(Subspace, UnpackOfAForeignKeyThrowsKeyOutsideSubspace) {
  const Subspace pq(Tuple().append("P"));
  const Subspace q(Tuple().append("Q"));
  try {
    pq.unpack(q.pack(Tuple().append(1)));
    FAIL() << "unpack accepted a key of another subspace";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kKeyOutsideSubspace);
    EXPECT_NE(std::string(e.what()).find("\\x02Q\\x00\\x15\\x01"), std::string::npos) << e.what();
  }
  // A strict prefix of the subspace's own prefix is outside too.
  EXPECT_THROW(pq.unpack("\x02P"), Error);
  EXPECT_FALSE(pq.contains("\x02P"));
}

TEST(Subspace, UnpackOfMalformedSuffixThrowsInvalidTuple) {
  const Subspace pq(Tuple().append("P"));
  try {
    pq.unpack(pq.key() + "\x16\x01");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidTuple);
  }
}

TEST(Subspace, ContainsTestsThePrefix) {
  const Subspace pq(Tuple().append("P"));
  EXPECT_TRUE(pq.contains(pq.key()));
  EXPECT_TRUE(pq.contains(pq.pack(Tuple().append(1))));
  EXPECT_TRUE(pq.contains(pq.key() + "anything"));
  EXPECT_FALSE(pq.contains(Subspace(Tuple().append("PP")).key()));
  EXPECT_FALSE(pq.contains(""));
}

TEST(Subspace, RangeCoversExactlyTheKeysStrictlyInside) {
  const Subspace pq(Tuple().append("P"));
  const KeyRange r = pq.range();
  EXPECT_EQ(r.begin, pq.key() + B("", {0x00}));
  EXPECT_EQ(r.end, pq.key() + "\xff");
  auto inside = [&](const std::string& k) { return r.begin <= k && k < r.end; };
  EXPECT_TRUE(inside(pq.pack(Tuple().append(nullptr))));
  EXPECT_TRUE(inside(pq.pack(Tuple().append(std::numeric_limits<int64_t>::min()))));
  EXPECT_TRUE(inside(pq.pack(Tuple().append(Versionstamp::complete(std::string(10, '\xfe'))))));
  EXPECT_TRUE(inside(pq.pack(Tuple().append(Tuple().append("z")))));
  EXPECT_FALSE(inside(pq.key()));  // the prefix itself is not inside, as in FoundationDB
  EXPECT_FALSE(inside(Subspace(Tuple().append("Q")).key()));

  const KeyRange r5 = pq.range(Tuple().append(5));
  EXPECT_EQ(r5.begin, B("\x02P", {0x00, 0x15, 0x05, 0x00}));
  EXPECT_EQ(r5.end, B("\x02P", {0x00, 0x15, 0x05, 0xff}));
  EXPECT_TRUE(r5.begin <= pq.pack(Tuple().append(5).append(0)));
  EXPECT_TRUE(pq.pack(Tuple().append(5).append("zzz")) < r5.end);
  EXPECT_FALSE(pq.pack(Tuple().append(6)) < r5.end);
  EXPECT_FALSE(r5.begin <= pq.pack(Tuple().append(4).append(1000)));
}

TEST(Subspace, SubspaceAndIndexingExtendThePrefix) {
  const Subspace pq(Tuple().append("P"));
  const Subspace p5 = pq[5];
  EXPECT_EQ(p5, Subspace(Tuple().append("P").append(5)));
  EXPECT_EQ(p5, pq.subspace(Tuple().append(5)));
  EXPECT_EQ(pq["x"][true].key(), Subspace(Tuple().append("P").append("x").append(true)).key());
  EXPECT_EQ(pq[std::string("s")], pq["s"]);
  EXPECT_EQ(pq[Bytes("b")].key(), B("\x02P", {0x00, 0x01, 'b', 0x00}));
  EXPECT_EQ(p5.unpack(pq.pack(Tuple().append(5).append(7))), Tuple().append(7));
  EXPECT_EQ(pq.unpack(p5.pack(Tuple().append(7))), Tuple().append(5).append(7));
  const Subspace raw = Subspace::from_raw_prefix("\x01raw");
  EXPECT_EQ(raw[1].key(), "\x01raw\x15\x01");
}

TEST(Subspace, PackWithVersionstampCountsThePrefixInTheOffset) {
  const Subspace pq(Tuple().append("P"));  // 3 bytes
  const std::string key = pq.pack_with_versionstamp(Tuple().append(Versionstamp::incomplete(2)));
  EXPECT_EQ(
      key, B("\x02P", {0x00, 0x33}) + std::string(10, '\xff') + B("", {0x00, 0x02, 0x04, 0, 0, 0}));
  EXPECT_THROW(pq.pack_with_versionstamp(Tuple().append(1)), Error);
  EXPECT_THROW(pq.pack(Tuple().append(Versionstamp::incomplete())), Error);
}

TEST(Subspace, ConstructorRejectsIncompleteVersionstampPrefix) {
  try {
    Subspace s(Tuple().append(Versionstamp::incomplete()));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidTuple);
  }
}

}  // namespace
}  // namespace kvq
