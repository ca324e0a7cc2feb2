// Crash test of the durable engine: a child process (tests/workers/rocksdb_crash_worker.cc) runs a
// push/pop workload on a Queue and a PriorityQueue and logs every operation; the test SIGKILLs it
// at random moments, reopens the database and checks, over the whole history of all runs:
//  - every acknowledged push is present, or was popped by an acknowledged pop, or is one of at
//    most one item per consumer whose pop was in flight at a kill;
//  - no acknowledged pop reappears, and no item is popped (acknowledged) twice;
//  - nothing appears that was never pushed, and nothing appears twice;
//  - an item seen present after one kill is not lost later (same rule as an acknowledged push).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kvq/database.h"
#include "kvq/priority_queue.h"
#include "kvq/queue.h"
#include "kvq/subspace.h"
#include "kvq/tuple.h"
#include "support/figures.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace kvq {
namespace {

// What the history of all runs so far says about one layout ("Q" or "P").
struct LayoutHistory {
  std::set<std::string> attempted;   // "B push": may be in the store
  std::set<std::string> must_exist;  // acknowledged pushes and items seen present after a kill
  std::set<std::string> popped;      // acknowledged pops
  std::set<std::string> lost;        // missing items charged to a pop in flight at a kill
  std::size_t lost_allowance = 0;    // sum over kills of consumers with a pop in flight
};

// One run's log, parsed. Lines not ending in '\n' (cut by the kill) are ignored: the operation
// they would describe had not started (B) or is treated as not acknowledged (A).
struct RunLog {
  std::map<std::string, std::vector<std::string>> begun_pushes;  // layout -> values
  std::map<std::string, std::vector<std::string>> acked_pushes;
  std::map<std::string, std::vector<std::string>> acked_pops;        // values (not "-")
  std::map<std::string, std::map<std::string, bool>> pop_in_flight;  // layout -> consumer -> B open
  std::size_t lines = 0;
};

RunLog parse_log(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  RunLog log;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;
    std::istringstream line(text.substr(pos, nl - pos));
    pos = nl + 1;
    std::string phase, op, layout, a, b;
    line >> phase >> op >> layout >> a >> b;
    ++log.lines;
    if (op == "push") {
      (phase == "B" ? log.begun_pushes : log.acked_pushes)[layout].push_back(a);
    } else if (op == "pop") {
      log.pop_in_flight[layout][a] = phase == "B";
      if (phase == "A" && b != "-") log.acked_pops[layout].push_back(b);
    } else {
      ADD_FAILURE() << "bad log line in " << path << ": " << line.str();
    }
  }
  return log;
}

// Every item of the layout: the values of the keys of its subspace whose first tuple element is
// an integer (docs/queues.md: items are the byte range [prefix + 0x0c, prefix + 0x1d)), read in
// one snapshot; the layer's O(1) size counter must agree (it is updated in the same transactions).
std::vector<std::string> present_items(const std::shared_ptr<Database>& db,
                                       const std::string& layout) {
  const Subspace space(Tuple().append(layout));
  Transaction tr = db->create_transaction();
  const auto rows = tr.get_range(space.key() + "\x0c", space.key() + "\x1d", {.snapshot = true});
  std::vector<std::string> items;
  for (const KeyValue& kv : rows) items.push_back(kv.value);
  const std::int64_t size =
      layout == "Q" ? Queue(db, space).size(tr) : PriorityQueue(db, space).size(tr);
  EXPECT_EQ(size, static_cast<std::int64_t>(items.size())) << "size counter of " << layout;
  return items;
}

// Merges one run's log into the history, then checks the store against it.
void check_after_kill(const std::shared_ptr<Database>& db, const RunLog& log,
                      std::map<std::string, LayoutHistory>& history, int run) {
  for (const std::string layout : {"Q", "P"}) {
    LayoutHistory& h = history[layout];
    for (const auto& v : log.begun_pushes.count(layout) ? log.begun_pushes.at(layout)
                                                        : std::vector<std::string>{}) {
      h.attempted.insert(v);
    }
    for (const auto& v : log.acked_pushes.count(layout) ? log.acked_pushes.at(layout)
                                                        : std::vector<std::string>{}) {
      EXPECT_TRUE(h.attempted.count(v)) << "run " << run << ": ack without begin: " << v;
      h.must_exist.insert(v);
    }
    for (const auto& v :
         log.acked_pops.count(layout) ? log.acked_pops.at(layout) : std::vector<std::string>{}) {
      EXPECT_TRUE(h.attempted.count(v)) << "run " << run << ": popped a never-pushed " << v;
      EXPECT_FALSE(h.lost.count(v)) << "run " << run << ": popped an item lost earlier " << v;
      EXPECT_TRUE(h.popped.insert(v).second) << "run " << run << ": popped twice: " << v;
    }
    std::size_t in_flight = 0;
    if (log.pop_in_flight.count(layout)) {
      for (const auto& [consumer, open] : log.pop_in_flight.at(layout)) in_flight += open ? 1 : 0;
    }
    h.lost_allowance += in_flight;

    const std::vector<std::string> items = present_items(db, layout);
    std::set<std::string> present;
    for (const auto& v : items) {
      EXPECT_TRUE(present.insert(v).second) << "run " << run << ": present twice: " << v;
      EXPECT_TRUE(h.attempted.count(v)) << "run " << run << ": never pushed: " << v;
      EXPECT_FALSE(h.popped.count(v)) << "run " << run << ": acknowledged pop reappeared: " << v;
      EXPECT_FALSE(h.lost.count(v)) << "run " << run << ": lost item reappeared: " << v;
    }
    std::size_t newly_lost = 0;
    for (const auto& v : h.must_exist) {
      if (!present.count(v) && !h.popped.count(v) && !h.lost.count(v)) {
        h.lost.insert(v);
        ++newly_lost;
      }
    }
    EXPECT_LE(newly_lost, in_flight)
        << "run " << run << " layout " << layout << ": " << newly_lost
        << " acknowledged items vanished, but only " << in_flight << " pops were in flight";
    EXPECT_LE(h.lost.size(), h.lost_allowance);
    h.must_exist.insert(present.begin(), present.end());
  }
}

void run_crash_test(const std::string& url_options, int kills, unsigned seed) {
  testing::TempDir dir("crash");
  const std::string url = "rocksdb:" + dir.file("db") + url_options;
  const std::string worker = testing::worker_path("rocksdb_crash_worker");
  std::mt19937 rng(seed);
  std::map<std::string, LayoutHistory> history;
  std::size_t total_acked_pushes = 0;
  std::size_t total_acked_pops = 0;
  for (int run = 0; run < kills; ++run) {
    const std::string log_path = dir.file("log." + std::to_string(run));
    {
      testing::Subprocess child(
          {worker, url, log_path, std::to_string(run), std::to_string(rng())});
      if (run % 8 == 7) {
        // Now and then kill it while it opens (recovers) the database.
        std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 20));
      } else {
        auto ready = child.read_line(std::chrono::seconds(20));
        ASSERT_EQ(ready, std::optional<std::string>("ready"))
            << "worker did not start (run " << run << ")";
        std::uniform_int_distribution<int> delay_ms(5, 150);
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
      }
      child.kill(SIGKILL);
      testing::record_figure(testing::kClientProcessKills, 1);
      const int status = child.wait();
      ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
          << "worker ended on its own (run " << run << "), status " << status;
    }
    const RunLog log = parse_log(log_path);
    for (const auto& [layout, v] : log.acked_pushes) total_acked_pushes += v.size();
    for (const auto& [layout, v] : log.acked_pops) total_acked_pops += v.size();
    auto db = open(url);
    check_after_kill(db, log, history, run);
    if (::testing::Test::HasFailure()) return;
  }
  // The workload must actually have done something for the checks to mean anything.
  EXPECT_GT(total_acked_pushes, static_cast<std::size_t>(kills));
  EXPECT_GT(total_acked_pops, 0u);
  ::testing::Test::RecordProperty("acked_pushes", static_cast<int>(total_acked_pushes));
  ::testing::Test::RecordProperty("acked_pops", static_cast<int>(total_acked_pops));
  std::printf(
      "%d kills: %zu acknowledged pushes, %zu acknowledged pops, %zu+%zu items lost to "
      "pops in flight (allowed %zu+%zu)\n",
      kills, total_acked_pushes, total_acked_pops, history["Q"].lost.size(),
      history["P"].lost.size(), history["Q"].lost_allowance, history["P"].lost_allowance);
}

TEST(RocksDbCrash, AcknowledgedQueueOperationsSurviveSigkillWithSync) {
  run_crash_test("", 25, 20261121u);
}

// sync=false skips the WAL fsync but still writes the WAL before a commit returns, so a killed
// process (as opposed to a crashed machine) loses nothing acknowledged either.
TEST(RocksDbCrash, AcknowledgedQueueOperationsSurviveSigkillWithoutSync) {
  run_crash_test("?sync=false", 25, 424242u);
}

}  // namespace
}  // namespace kvq
