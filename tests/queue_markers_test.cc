// Regression test of issue 16, defect 4: a program creating a Queue per request used to grow
// (a thread-local map entry per object, ~170 bytes, never pruned) and left one idempotency marker
// key per object in the store until the 10-minute sweep. Now an object's markers are cleared by its
// later operations and by its destructor: memory stays flat and nothing is left behind.
// Markers are written only where commits can end in commit_unknown_result: the tests of their
// clearing run on the memory engine behind the fault injector with no faults (kMarked), which
// writes them as etcd does; on plain memory: none is written.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "kvq/kvq.h"
#include "support/layer_engines.h"

namespace kvq {
namespace {

// The memory engine with markers written (the fault injector, no faults drawn).
constexpr char kMarked[] = "memory:?unknown_result_rate=0";

long rss_kib() {
  long pages = 0, resident = 0;
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  std::fclose(f);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

std::int64_t marker_keys(Database& db, const Subspace& space) {
  return db.run([&](Transaction& tr) {
    KeyRange r = space.subspace(Tuple().append("kvq")).range(Tuple().append("mark"));
    return static_cast<std::int64_t>(tr.get_range(r.begin, r.end).size());
  });
}

void use_queues(const std::shared_ptr<Database>& db, const Subspace& space, bool hc, long n) {
  QueueOptions o;
  o.high_contention = hc;
  for (long i = 0; i < n; ++i) {
    Queue q(db, space, o);
    q.push("x");
    ASSERT_EQ(q.pop(), "x");
  }
}

TEST(QueueMarkers, HundredThousandQueueObjectsLeaveNoMarkersAndKeepMemoryFlat) {
  auto db = open(kMarked);
  const Subspace space(Tuple().append("M"));
  const long n =
      testing::env_int("KVQ_TEST_MARKER_OBJECTS", testing::kSanitizerBuild ? 20000 : 100000);
  use_queues(db, space, false, n / 5);  // warm up the engine and allocator
  const long before = rss_kib();
  use_queues(db, space, false, n - n / 5);
  const long grown = rss_kib() - before;
  EXPECT_EQ(marker_keys(*db, space), 0);
  std::printf("RSS growth over %ld Queue objects: %ld KiB\n", n - n / 5, grown);
  // ASan keeps freed blocks in a quarantine (256 MB by default), so RSS says nothing there.
  if (testing::kSanitizerBuild) GTEST_SKIP() << "RSS is not meaningful under sanitizers";
  EXPECT_LT(grown, 8 * 1024) << "RSS grew by " << grown << " KiB over " << n << " Queue objects";
}

TEST(QueueMarkers, HighContentionQueueObjectsLeaveNothingBehind) {
  auto db = open(kMarked);
  const Subspace space(Tuple().append("H"));
  use_queues(db, space, true, 2000);
  EXPECT_EQ(marker_keys(*db, space), 0);
  const std::int64_t left = db->run([&](Transaction& tr) {
    KeyRange r = space.subspace(Tuple().append("kvq")).range();
    std::int64_t n = 0;
    for (const auto& kv : tr.get_range(r.begin, r.end)) {
      Tuple t = space.subspace(Tuple().append("kvq")).unpack(kv.key);
      const std::string kind = t.get_string(0);
      if (kind != "size" && kind != "waiting") ++n;  // the two counters stay
    }
    return n;
  });
  EXPECT_EQ(left, 0);
}

TEST(QueueMarkers, ManyThreadsOnOneQueueKeepFewMarkers) {
  auto db = open(kMarked);
  const Subspace space(Tuple().append("T"));
  {
    Queue q(db, space);
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 2000; ++i) {
          q.push("x");
          q.pop();
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_LE(marker_keys(*db, space), 64);
  }
  EXPECT_EQ(marker_keys(*db, space), 0);  // the destructor cleared the rest
}

TEST(QueueMarkers, WrittenOnlyWhereCommitsCanBeUnknown) {
  const Subspace space(Tuple().append("W"));
  auto marked = open(kMarked);
  auto plain = open("memory:");
  EXPECT_TRUE(marked->commits_can_be_unknown());
  EXPECT_FALSE(plain->commits_can_be_unknown());
  Queue with(marked, space);
  Queue without(plain, space);
  with.push("x");
  without.push("x");
  // The push's marker stays until a later operation or the destructor clears it.
  EXPECT_EQ(marker_keys(*marked, space), 1);
  EXPECT_EQ(marker_keys(*plain, space), 0);
  EXPECT_EQ(with.pop(), "x");
  EXPECT_EQ(without.pop(), "x");
}

}  // namespace
}  // namespace kvq
