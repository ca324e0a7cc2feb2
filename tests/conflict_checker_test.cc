// Unit tests of the commit pipeline's conflict checker (src/engine/pipeline/conflict_checker.h).
#include "engine/pipeline/conflict_checker.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace kvq::pipeline {
namespace {

using engine::KeyRange;
using Outcome = ConflictChecker::Outcome;

struct Tx {
  Version read_version;
  std::vector<KeyRange> reads;
  std::vector<KeyRange> writes;
};

std::vector<Outcome> run(ConflictChecker& c, std::vector<Tx> batch, Version version) {
  std::vector<CheckerTransaction> in;
  for (Tx& t : batch) in.push_back({t.read_version, &t.reads, &t.writes});
  return c.resolve(in, version);
}

Outcome one(ConflictChecker& c, Tx t, Version version) {
  return run(c, {std::move(t)}, version)[0];
}

KeyRange key(const std::string& k) { return {k, k + std::string(1, '\0')}; }

TEST(ConflictChecker, EmptyHistoryNeverConflicts) {
  ConflictChecker c;
  EXPECT_EQ(one(c, {5, {{"a", "z"}}, {key("k")}}, 10), Outcome::kCommitted);
}

TEST(ConflictChecker, ReadConflictsOnlyWithWritesAfterItsReadVersion) {
  ConflictChecker c;
  one(c, {-1, {}, {{"b", "c"}}}, 10);
  EXPECT_EQ(one(c, {9, {{"a", "bb"}}, {}}, 20), Outcome::kConflict);
  EXPECT_EQ(one(c, {10, {{"a", "bb"}}, {}}, 21), Outcome::kCommitted);
  EXPECT_EQ(one(c, {15, {{"a", "bb"}}, {}}, 22), Outcome::kCommitted);
}

TEST(ConflictChecker, RangeBoundariesAreHalfOpen) {
  ConflictChecker c;
  one(c, {-1, {}, {{"b", "c"}}}, 10);
  EXPECT_EQ(one(c, {5, {{"a", "b"}}, {}}, 11), Outcome::kCommitted);
  EXPECT_EQ(one(c, {5, {{"c", "d"}}, {}}, 12), Outcome::kCommitted);
  EXPECT_EQ(one(c, {5, {key("b")}, {}}, 13), Outcome::kConflict);
  EXPECT_EQ(one(c, {5, {{"bz", "bzz"}}, {}}, 14), Outcome::kConflict);
  EXPECT_EQ(one(c, {5, {{"", "\xff"}}, {}}, 15), Outcome::kConflict);
}

TEST(ConflictChecker, NewerWriteInsideOlderRangeKeepsBothVersions) {
  ConflictChecker c;
  one(c, {-1, {}, {{"a", "z"}}}, 10);
  one(c, {-1, {}, {{"m", "n"}}}, 20);
  EXPECT_EQ(one(c, {15, {{"a", "b"}}, {}}, 30), Outcome::kCommitted);
  EXPECT_EQ(one(c, {15, {key("m")}, {}}, 31), Outcome::kConflict);
  EXPECT_EQ(one(c, {15, {{"n", "o"}}, {}}, 32), Outcome::kCommitted);
  EXPECT_EQ(one(c, {5, {{"n", "o"}}, {}}, 33), Outcome::kConflict);
  EXPECT_EQ(c.max_write_version("a", "z"), 20);
  EXPECT_EQ(c.max_write_version("n", "z"), 10);
}

TEST(ConflictChecker, EarlierTransactionOfTheSameBatchConflictsWithLaterReaders) {
  ConflictChecker c;
  auto out = run(c, {{-1, {}, {key("k")}}, {5, {key("k")}, {}}}, 10);
  EXPECT_EQ(out[0], Outcome::kCommitted);
  EXPECT_EQ(out[1], Outcome::kConflict);
  // In the other order the reader goes first and both commit.
  out = run(c, {{15, {key("j")}, {}}, {-1, {}, {key("j")}}}, 20);
  EXPECT_EQ(out[0], Outcome::kCommitted);
  EXPECT_EQ(out[1], Outcome::kCommitted);
}

TEST(ConflictChecker, WritesOfRefusedTransactionsAreNotRecorded) {
  ConflictChecker c;
  one(c, {-1, {}, {key("k")}}, 10);
  auto out = run(c, {{5, {key("k")}, {key("x")}}, {9, {key("x")}, {}}}, 20);
  EXPECT_EQ(out[0], Outcome::kConflict);
  EXPECT_EQ(out[1], Outcome::kCommitted);
  EXPECT_EQ(c.max_write_version("x", "y"), 0);
}

TEST(ConflictChecker, BlindWritesAlwaysCommit) {
  ConflictChecker c;
  one(c, {-1, {}, {{"", "\xff"}}}, 10);
  EXPECT_EQ(one(c, {-1, {}, {{"", "\xff"}}}, 11), Outcome::kCommitted);
  EXPECT_EQ(one(c, {1, {}, {key("a")}}, 12), Outcome::kCommitted);
}

TEST(ConflictChecker, ReadVersionBelowTheFloorIsTooOld) {
  ConflictChecker c;
  c.set_floor(100);
  EXPECT_EQ(one(c, {99, {key("a")}, {}}, 200), Outcome::kTooOld);
  EXPECT_EQ(one(c, {100, {key("a")}, {}}, 201), Outcome::kCommitted);
  c.set_floor(50);  // lower floors are ignored
  EXPECT_EQ(c.floor(), 100);
}

TEST(ConflictChecker, EmptyRangesAreIgnored) {
  ConflictChecker c;
  one(c, {-1, {}, {{"b", "b"}}}, 10);
  EXPECT_EQ(c.history_size(), 1u);
  EXPECT_EQ(one(c, {5, {{"b", "b"}}, {}}, 11), Outcome::kCommitted);
}

TEST(ConflictChecker, HistoryStaysSmallUnderLongQueueChurn) {
  // A queue: each step pushes item i+1000 and pops item i (reading [queue begin, key_after(first
  // item)) over the region of all the items deleted before), with the floor 50 versions behind.
  ConflictChecker c;
  auto item = [](int i) {
    std::string s = "q/" + std::to_string(1000000 + i);
    return s;
  };
  Version v = 1;
  std::size_t max_size = 0;
  for (int i = 0; i < 200000; ++i) {
    ++v;
    one(c, {-1, {}, {key(item(i + 1000))}}, v);  // push
    ++v;
    Outcome o = one(c, {v - 2, {{"q/", item(i) + '\0'}}, {key(item(i))}}, v);  // pop
    ASSERT_EQ(o, Outcome::kCommitted);
    c.set_floor(v - 50);
    max_size = std::max(max_size, c.history_size());
  }
  EXPECT_LT(max_size, 200u) << "history must not grow with the number of deleted keys";
  // Recent writes still conflict.
  EXPECT_EQ(one(c, {v - 10, {{"q/", "q0"}}, {}}, v + 1), Outcome::kConflict);
}

TEST(ConflictChecker, QueuePopCheckStaysCheapWhileAnOldReaderHoldsTheFloor) {
  // The floor never moves (an old transaction pins it), so the history keeps every deleted item;
  // a pop's read over all of them must still cost about the number of writes since its read
  // version, not the number of deleted items.
  ConflictChecker c;
  auto item = [](int i) { return "q/" + std::to_string(1000000 + i); };
  Version v = 1;
  const int kSteps = 50000;
  for (int i = 0; i < kSteps; ++i) {
    ++v;
    one(c, {-1, {}, {key(item(i + 10))}}, v);
    ++v;
    ASSERT_EQ(one(c, {v - 2, {{"q/", item(i) + '\0'}}, {key(item(i))}}, v), Outcome::kCommitted);
  }
  EXPECT_GT(c.history_size(), static_cast<std::size_t>(kSteps));
  EXPECT_LT(c.work(), 50u * kSteps) << "checks must not scan the whole deleted region";
  // A read version from before the churn still sees the conflict.
  EXPECT_EQ(one(c, {1, {{"q/", "q0"}}, {}}, v + 1), Outcome::kConflict);
  EXPECT_EQ(one(c, {v - 1, {{"q/", item(kSteps / 2)}}, {}}, v + 2), Outcome::kCommitted);
}

// Random batches checked against a brute-force list of every committed write, with the floor
// `floor_lag` versions behind: a short lag keeps the checked writes among the newest ones (scanned,
// never folded into the step function), a long one folds most of them.
void agrees_with_brute_force(Version floor_lag) {
  std::mt19937 rng(42);
  auto rand_key = [&] {
    std::string s(1 + rng() % 2, 'a');
    for (char& ch : s) ch = static_cast<char>('a' + rng() % 6);
    return s;
  };
  auto rand_range = [&] {
    std::string a = rand_key(), b = rand_key();
    if (b < a) std::swap(a, b);
    if (rng() % 4 == 0) b = a + '\0';
    return KeyRange{a, b};
  };
  struct Written {
    Version version;
    KeyRange range;
  };
  std::vector<Written> all;
  ConflictChecker c;
  Version v = 1;
  int conflicts = 0, commits = 0;
  for (int round = 0; round < 3000; ++round) {
    v += 1 + rng() % 3;
    const Version floor = std::max<Version>(0, v - floor_lag);
    c.set_floor(floor);
    std::vector<Tx> batch(1 + rng() % 4);
    for (Tx& t : batch) {
      t.read_version =
          rng() % 5 == 0
              ? -1
              : std::max<Version>(floor, v - 1 - static_cast<Version>(rng() % (floor_lag + 5)));
      for (unsigned n = rng() % 3; n > 0; --n) t.reads.push_back(rand_range());
      for (unsigned n = rng() % 3; n > 0; --n) t.writes.push_back(rand_range());
    }
    std::vector<Outcome> got = run(c, batch, v);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const Tx& t = batch[i];
      bool conflict = false;
      if (t.read_version >= 0) {
        for (const KeyRange& r : t.reads) {
          for (const Written& w : all) {
            if (w.version > t.read_version && r.begin < r.end && w.range.begin < r.end &&
                r.begin < w.range.end) {
              conflict = true;
            }
          }
        }
      }
      ASSERT_EQ(got[i], conflict ? Outcome::kConflict : Outcome::kCommitted)
          << "round " << round << " tx " << i;
      ++(conflict ? conflicts : commits);
      if (!conflict) {
        for (const KeyRange& w : t.writes) {
          if (w.begin < w.end) all.push_back({v, w});
        }
      }
    }
  }
  EXPECT_GT(conflicts, 100);
  EXPECT_GT(commits, 100);
  EXPECT_LT(c.history_size(), 400u + 20u * static_cast<std::size_t>(floor_lag));
}

TEST(ConflictChecker, AgreesWithBruteForceOnRandomBatches) { agrees_with_brute_force(20); }

TEST(ConflictChecker, AgreesWithBruteForceWhenFewWritesWaitToBeFolded) {
  agrees_with_brute_force(2);
}

TEST(ConflictChecker, AgreesWithBruteForceWhenMostWritesAreFolded) { agrees_with_brute_force(300); }

}  // namespace
}  // namespace kvq::pipeline
