// Tests of SkipHints (src/engine/rocksdb/skip_hints.h): when a "known empty" stretch may be learnt,
// used, split, merged and must be forgotten.
#include <gtest/gtest.h>

#include "engine/rocksdb/skip_hints.h"

namespace kvq::engine::rocksdb_engine {
namespace {

using Stretches = std::vector<KeyStretch>;

// Every stretch of [begin, end) known at `sequence`, in forward order.
Stretches known(const SkipHints& h, std::string_view begin, std::string_view end,
                std::uint64_t sequence) {
  return h.empty_stretches(begin, end, sequence, /*reverse=*/false, 100);
}

// The key right after `k`.
std::string after(std::string k) { return k.push_back('\0'), k; }

TEST(SkipHints, NothingKnownNothingSkipped) {
  SkipHints h(10);
  EXPECT_EQ(known(h, "a", "z", 10), Stretches{});
}

TEST(SkipHints, StretchIsUsedAtItsSequenceAndLaterOnly) {
  SkipHints h(10);
  h.learn("b", "m", 10);
  EXPECT_EQ(known(h, "a", "z", 10), (Stretches{{"b", "m"}}));
  EXPECT_EQ(known(h, "a", "z", 11), (Stretches{{"b", "m"}}));
  EXPECT_EQ(known(h, "a", "z", 9), Stretches{});  // the log does not reach back to 9
}

TEST(SkipHints, AnyRangeUsesTheStretchesInsideItCutToItInItsOrder) {
  SkipHints h(10);
  h.learn("b", "m", 10);
  h.learn("p", "t", 10);
  h.learn("w", "y", 11);
  EXPECT_EQ(known(h, "c", "q", 10), (Stretches{{"c", "m"}, {"p", "q"}}));
  EXPECT_EQ(h.empty_stretches("c", "q", 10, /*reverse=*/true, 100),
            (Stretches{{"p", "q"}, {"c", "m"}}));
  EXPECT_EQ(h.empty_stretches("a", "z", 11, /*reverse=*/true, 100),
            (Stretches{{"w", "y"}, {"p", "t"}, {"b", "m"}}));
  EXPECT_EQ(h.empty_stretches("a", "z", 11, /*reverse=*/true, 1), (Stretches{{"w", "y"}}));
  EXPECT_EQ(h.empty_stretches("a", "z", 11, /*reverse=*/false, 1), (Stretches{{"b", "m"}}));
  EXPECT_EQ(known(h, "m", "p", 11), Stretches{});
  EXPECT_EQ(h.empty_stretches("m", "p", 11, /*reverse=*/true, 100), Stretches{});
}

TEST(SkipHints, PutInsideAStretchSplitsItAroundTheKey) {
  SkipHints h(10);
  h.learn("a", "z", 10);
  h.begin_write({"m", "zz", "0"});  // "zz" and "0" are outside
  h.end_write(11);
  EXPECT_EQ(known(h, "", "\xff", 11), (Stretches{{"a", "m"}, {after("m"), "z"}}));
  h.begin_write({"a", std::string("m\0", 2)});  // the first key of each piece
  h.end_write(12);
  EXPECT_EQ(known(h, "", "\xff", 12), (Stretches{{after("a"), "m"}, {after(after("m")), "z"}}));
  EXPECT_EQ(h.size(), 2u);
}

TEST(SkipHints, TouchingAndOverlappingStretchesMergeAtTheLaterSequence) {
  SkipHints h(10);
  h.learn("a", "c", 10);
  h.learn("c", "e", 11);
  h.learn("d", "g", 10);
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(known(h, "", "\xff", 11), (Stretches{{"a", "g"}}));
  EXPECT_EQ(known(h, "", "\xff", 10), (Stretches{{"a", "g"}}));  // nothing was cleared since 10
  h.learn("b", "f", 12);                                         // inside: nothing changes
  EXPECT_EQ(known(h, "", "\xff", 11), (Stretches{{"a", "g"}}));
}

TEST(SkipHints, LearningFromAnOlderSnapshotKeepsOnlyWhatLaterWritesLeftEmpty) {
  SkipHints h(10);
  h.begin_write({"c"});
  h.end_write(11);
  h.begin_write({"x", "e"});
  h.end_write(12);
  h.learn("a", "m", 10);  // "c" (11) and "e" (12) were put after the snapshot
  EXPECT_EQ(known(h, "", "\xff", 12),
            (Stretches{{"a", "c"}, {after("c"), "e"}, {after("e"), "m"}}));
  SkipHints g(10);
  g.begin_write({"c"});
  g.end_write(11);
  g.learn("c", after("c"), 10);  // nothing of it is left
  EXPECT_EQ(g.size(), 0u);
}

TEST(SkipHints, PendingWriteSplitsWhatIsLearnt) {
  SkipHints h(10);
  h.begin_write({"c"});
  h.learn("a", "m", 10);
  h.learn("n", "p", 10);
  h.end_write(11);
  EXPECT_EQ(known(h, "", "\xff", 11), (Stretches{{"a", "c"}, {after("c"), "m"}, {"n", "p"}}));
}

TEST(SkipHints, AnOlderReaderUsesAStretchWithoutTheKeysClearedSinceItsSnapshot) {
  SkipHints h(10);
  h.begin_write({}, {{"m", after("m")}, {"p", "r"}, {"zz", "zzz"}});
  h.end_write(11);
  h.begin_write({}, {{"c", after("c")}});
  h.end_write(12);
  h.learn("a", "z", 12);
  EXPECT_EQ(known(h, "", "\xff", 12), (Stretches{{"a", "z"}}));
  // At 11, "c" may still have been live; at 10, "m" and [p, r) too.
  EXPECT_EQ(known(h, "", "\xff", 11), (Stretches{{"a", "c"}, {after("c"), "z"}}));
  EXPECT_EQ(known(h, "", "\xff", 10),
            (Stretches{{"a", "c"}, {after("c"), "m"}, {after("m"), "p"}, {"r", "z"}}));
  EXPECT_EQ(h.empty_stretches("b", "q", 10, /*reverse=*/true, 2),
            (Stretches{{after("m"), "p"}, {after("c"), "m"}}));
  for (std::uint64_t s = 13; s <= 13 + SkipHints::kMaxStaleWrites; ++s) {
    h.begin_write({"zzzz"});
    h.end_write(s);
  }
  EXPECT_EQ(known(h, "", "\xff", 12), (Stretches{{"a", "z"}}));
  EXPECT_EQ(known(h, "", "\xff", 11), Stretches{});  // too many writes since to look through
}

TEST(SkipHints, SnapshotsOlderThanTheLogCannotTeach) {
  SkipHints h(10);
  for (std::uint64_t s = 11; s < 11 + SkipHints::kLogWrites + 5; ++s) {
    h.begin_write({"zzz"});
    h.end_write(s);
  }
  h.learn("a", "m", 10);
  EXPECT_EQ(h.size(), 0u);
  h.learn("a", "m", 10 + SkipHints::kLogWrites + 4);
  EXPECT_EQ(known(h, "", "\xff", 1000000), (Stretches{{"a", "m"}}));
}

TEST(SkipHints, HugeWritesBlockLearningFromOlderSnapshots) {
  SkipHints h(10);
  std::vector<std::string> keys;
  for (std::size_t i = 0; i <= SkipHints::kMaxLoggedKeys; ++i)
    keys.push_back("z" + std::to_string(i));
  std::vector<std::string_view> views(keys.begin(), keys.end());
  h.begin_write(views);
  h.end_write(11);
  h.learn("a", "m", 10);
  EXPECT_EQ(h.size(), 0u);
  h.learn("a", "m", 11);
  EXPECT_EQ(known(h, "", "\xff", 11), (Stretches{{"a", "m"}}));
}

TEST(SkipHints, LogIsBoundedByBytesToo) {
  SkipHints h(10);
  std::vector<std::string> keys;
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < SkipHints::kMaxLoggedKeys; ++i) {
    keys.push_back("z" + std::to_string(i) + std::string(100, 'x'));
    bytes += keys.back().size();
  }
  std::vector<std::string_view> views(keys.begin(), keys.end());
  const std::uint64_t writes = SkipHints::kMaxLogBytes / bytes + 2;
  ASSERT_LT(writes, SkipHints::kLogWrites);
  for (std::uint64_t s = 11; s < 11 + writes; ++s) {
    h.begin_write(views);
    h.end_write(s);
  }
  h.learn("a", "m", 11);  // the write at 12 was dropped from the log: cannot check it
  EXPECT_EQ(h.size(), 0u);
  h.learn("a", "m", 10 + writes);
  EXPECT_EQ(known(h, "", "\xff", 1000000), (Stretches{{"a", "m"}}));
}

TEST(SkipHints, StaysBounded) {
  SkipHints h(10);
  for (int i = 0; i < 5000; ++i) {
    const std::string k = "k" + std::to_string(i);
    h.learn(k, k + "z", 10);
  }
  EXPECT_GT(h.size(), 0u);
  EXPECT_LE(h.size(), SkipHints::kMaxStretches);
}

}  // namespace
}  // namespace kvq::engine::rocksdb_engine
