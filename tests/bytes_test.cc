// common/bytes.h: the key-range arithmetic that conflict detection relies on (the etcd engine
// reads at commit exactly the parts of its read-conflict ranges that no read covered), and base64
// (lease tokens, the CLI's --json for bytes that are not UTF-8).
#include "common/bytes.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvq {
namespace {

std::string show(const std::vector<KeyRange>& ranges) {
  std::string out;
  for (const KeyRange& r : ranges) out += "[" + r.begin + "," + r.end + ")";
  return out;
}

TEST(KeyRanges, MergeSortsJoinsTouchingAndOverlappingRangesAndDropsEmptyOnes) {
  EXPECT_EQ(show(common::merge_ranges(
                {{"m", "p"}, {"a", "c"}, {"c", "d"}, {"x", "x"}, {"n", "o"}, {"b", "c"}})),
            "[a,d)[m,p)");
}

TEST(KeyRanges, SubtractKeepsThePartsOutsideEveryCut) {
  using common::subtract_ranges;
  EXPECT_EQ(show(subtract_ranges({{"a", "z"}}, {})), "[a,z)");
  EXPECT_EQ(show(subtract_ranges({{"a", "z"}}, {{"a", "z"}})), "");
  EXPECT_EQ(show(subtract_ranges({{"a", "z"}}, {{"0", "zz"}})), "");
  EXPECT_EQ(show(subtract_ranges({{"a", "z"}}, {{"c", "e"}, {"g", "h"}})), "[a,c)[e,g)[h,z)");
  EXPECT_EQ(show(subtract_ranges({{"a", "z"}}, {{"0", "b"}, {"y", "zz"}})), "[b,y)");
  // Cuts spanning several ranges, ranges given unsorted and overlapping.
  EXPECT_EQ(show(subtract_ranges({{"m", "r"}, {"a", "f"}, {"d", "h"}}, {{"e", "n"}, {"q", "s"}})),
            "[a,e)[n,q)");
  // A point range [k, k\0) covered by a read of [k, k\0), and not by a read of [k, k).
  const std::string k = "k", after_k = std::string("k") + '\0';
  EXPECT_EQ(show(subtract_ranges({{k, after_k}}, {{k, after_k}})), "");
  EXPECT_EQ(subtract_ranges({{k, after_k}}, {{k, k}}).size(), 1u);
}

TEST(Base64, MatchesTheTestVectorsOfRfc4648InBothAlphabets) {
  using common::Base64;
  const char* plain[][2] = {{"", ""},
                            {"f", "Zg=="},
                            {"fo", "Zm8="},
                            {"foo", "Zm9v"},
                            {"foob", "Zm9vYg=="},
                            {"fooba", "Zm9vYmE="},
                            {"foobar", "Zm9vYmFy"}};
  for (const auto& [in, out] : plain) EXPECT_EQ(common::base64(in, Base64::kStandard), out) << in;
  EXPECT_EQ(common::base64("fooba", Base64::kUrl), "Zm9vYmE");
  EXPECT_EQ(common::base64("\xfb\xff", Base64::kStandard), "+/8=");
  EXPECT_EQ(common::base64("\xfb\xff", Base64::kUrl), "-_8");
}

}  // namespace
}  // namespace kvq
