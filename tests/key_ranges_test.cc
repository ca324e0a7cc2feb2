// The key-range arithmetic of common/bytes.h that conflict detection relies on (the etcd engine
// reads at commit exactly the parts of its read-conflict ranges that no read covered).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/bytes.h"

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

}  // namespace
}  // namespace kvq
