// Tests of SkipHints (src/engine/rocksdb/skip_hints.h): when a "known empty" stretch may be learnt,
// used, and must be forgotten.
#include <gtest/gtest.h>

#include "engine/rocksdb/skip_hints.h"

namespace kvq::engine::rocksdb_engine {
namespace {

TEST(SkipHints, NothingKnownStartsAtTheRangeEdges) {
  SkipHints h(10);
  EXPECT_EQ(h.forward_start("a", 10), "a");
  EXPECT_EQ(h.reverse_start("z", 10), "z");
}

TEST(SkipHints, ForwardHintIsUsedAtItsSequenceAndLaterOnly) {
  SkipHints h(10);
  h.learn_forward("a", "m", 10);
  EXPECT_EQ(h.forward_start("a", 10), "m");
  EXPECT_EQ(h.forward_start("a", 11), "m");
  EXPECT_EQ(h.forward_start("a", 9), "a");   // an older snapshot may still see the keys
  EXPECT_EQ(h.forward_start("b", 10), "b");  // only the exact range start is known
}

TEST(SkipHints, ReverseHintIsUsedAtItsSequenceAndLaterOnly) {
  SkipHints h(10);
  h.learn_reverse("m", "z", 10);
  EXPECT_EQ(h.reverse_start("z", 12), "m");
  EXPECT_EQ(h.reverse_start("z", 9), "z");
}

TEST(SkipHints, PutInsideTheStretchShrinksTheHintPutOutsideKeepsIt) {
  SkipHints h(10);
  h.learn_forward("a", "m", 10);
  h.learn_reverse("m", "z", 10);
  h.begin_write({"m", "zz", "0"});  // "m" is the forward edge (live already): outside [a, m)
  h.end_write(11);
  EXPECT_EQ(h.forward_start("a", 11), "m");
  EXPECT_EQ(h.reverse_start("z", 11), std::string("m\0", 2));  // [m\0, z) is still empty
  h.begin_write({"c", "x"});
  h.end_write(12);
  EXPECT_EQ(h.forward_start("a", 12), "c");
  EXPECT_EQ(h.reverse_start("z", 12), std::string("x\0", 2));
  h.begin_write({"a"});  // nothing of [a, c) stays empty
  h.end_write(13);
  EXPECT_EQ(h.forward_start("a", 13), "a");
  EXPECT_EQ(h.size(), 1u);
}

TEST(SkipHints, LearningFromAnOlderSnapshotKeepsOnlyWhatLaterWritesLeftEmpty) {
  SkipHints h(10);
  h.begin_write({"c"});
  h.end_write(11);
  h.begin_write({"x", "e"});
  h.end_write(12);
  h.learn_forward("a", "m", 10);  // "c" (11) and "e" (12) were put after the snapshot
  EXPECT_EQ(h.forward_start("a", 12), "c");
  h.learn_reverse("b", "z", 10);  // "x" (12) was put after the snapshot
  EXPECT_EQ(h.reverse_start("z", 12), std::string("x\0", 2));
  h.learn_forward("a", "m", 11);  // only "e" was put after 11
  EXPECT_EQ(h.forward_start("a", 12), "e");
  h.learn_forward("c", "d", 10);  // "c" itself was put: nothing of [c, d) is known empty
  EXPECT_EQ(h.forward_start("c", 12), "c");
}

TEST(SkipHints, PendingWriteShrinksWhatIsLearnt) {
  SkipHints h(10);
  h.begin_write({"c"});
  h.learn_forward("a", "m", 10);
  h.learn_forward("n", "p", 10);
  h.end_write(11);
  EXPECT_EQ(h.forward_start("a", 11), "c");
  EXPECT_EQ(h.forward_start("n", 11), "p");
}

TEST(SkipHints, SnapshotsOlderThanTheLogCannotTeach) {
  SkipHints h(10);
  for (std::uint64_t s = 11; s < 11 + SkipHints::kLogWrites + 5; ++s) {
    h.begin_write({"zzz"});
    h.end_write(s);
  }
  h.learn_forward("a", "m", 10);
  EXPECT_EQ(h.forward_start("a", 1000000), "a");
  h.learn_forward("a", "m", 10 + SkipHints::kLogWrites + 4);
  EXPECT_EQ(h.forward_start("a", 1000000), "m");
}

TEST(SkipHints, HugeWritesBlockLearningFromOlderSnapshots) {
  SkipHints h(10);
  std::vector<std::string> keys;
  for (std::size_t i = 0; i <= SkipHints::kMaxLoggedKeys; ++i)
    keys.push_back("z" + std::to_string(i));
  std::vector<std::string_view> views(keys.begin(), keys.end());
  h.begin_write(views);
  h.end_write(11);
  h.learn_forward("a", "m", 10);
  EXPECT_EQ(h.forward_start("a", 11), "a");
  h.learn_forward("a", "m", 11);
  EXPECT_EQ(h.forward_start("a", 11), "m");
}

TEST(SkipHints, LogIsBoundedByTotalKeysToo) {
  SkipHints h(10);
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < SkipHints::kMaxLoggedKeys; ++i)
    keys.push_back("z" + std::to_string(i));
  std::vector<std::string_view> views(keys.begin(), keys.end());
  const std::uint64_t writes = SkipHints::kMaxLogKeys / SkipHints::kMaxLoggedKeys + 2;
  for (std::uint64_t s = 11; s < 11 + writes; ++s) {
    h.begin_write(views);
    h.end_write(s);
  }
  h.learn_forward("a", "m", 11);  // the write at 12 was dropped from the log: cannot check it
  EXPECT_EQ(h.forward_start("a", 1000000), "a");
  h.learn_forward("a", "m", 10 + writes);
  EXPECT_EQ(h.forward_start("a", 1000000), "m");
}

TEST(SkipHints, StaysBounded) {
  SkipHints h(10);
  for (int i = 0; i < 1000; ++i) {
    h.learn_forward("k" + std::to_string(i), "k" + std::to_string(i) + "z", 10);
  }
  EXPECT_LE(h.size(), SkipHints::kMaxHints);
}

}  // namespace
}  // namespace kvq::engine::rocksdb_engine
