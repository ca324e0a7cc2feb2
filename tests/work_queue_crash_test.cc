// Worker processes killed with SIGKILL while holding leases (tests/workers/work_queue_worker.cc):
// on RocksDB by killing and restarting the one process that may open the database, on etcd with
// several workers at once of which some are killed. Every item's effect (written in the ack's
// transaction) is applied exactly once: none lost, none twice. Each test also checks that some
// worker was killed while it held a lease (its output ends with "took N"), the case it is for.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "kvq/kvq.h"
#include "support/engines.h"
#include "support/etcd_cluster.h"
#include "support/figures.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace kvq {
namespace {

using namespace std::chrono_literals;

// The helpers serve the engine tests below; without RocksDB and etcd there are none.
#if defined(KVQ_WITH_ROCKSDB) || defined(KVQ_WITH_ETCD)
const Subspace kQueue(Tuple().append("wq"));
const Subspace kEffects(Tuple().append("effects"));

void push_items(const std::string& url, int n) {
  auto db = kvq::open(url);
  Queue q(db, kQueue);
  for (int i = 0; i < n; ++i) q.push("item-" + std::to_string(i));
}

void expect_each_effect_once(const std::string& url, int n) {
  auto db = kvq::open(url);
  db->run([&](Transaction& tr) {
    for (int i = 0; i < n; ++i) {
      auto v = tr.get(kEffects.pack(Tuple().append(i)));
      EXPECT_EQ(v ? common::decode_le64(*v) : 0, 1) << "item-" << i;
    }
  });
  const QueueStats s = Queue(db, kQueue).stats();
  EXPECT_EQ(s.ready + s.leased + s.delayed, 0);
}

std::vector<std::string> worker(const std::string& url) {
  return {testing::worker_path("work_queue_worker"), url, "300", "5"};
}

// Lets the worker take `takes` leases, then kills it at once, while it works on the last (its
// 5 ms of work and the ack's commit); returns whether it still held that lease when it died (its
// last line is "took N", not "acked N"). Reading each line as it comes keeps the kill close to it.
bool kill_after_takes(testing::Subprocess& p, int takes) {
  EXPECT_EQ(p.read_line(30s), "ready");
  for (int seen = 0; seen < takes;) {
    const std::optional<std::string> line = p.read_line(30s);
    if (!line) break;
    if (line->starts_with("took ")) ++seen;
  }
  p.kill(SIGKILL);
  testing::record_figure(testing::kClientProcessKills, 1);
  const int status = p.wait();
  EXPECT_TRUE(WIFSIGNALED(status)) << "the worker finished before it was killed: " << status;
  std::string out = p.output();
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out.substr(out.rfind('\n') + 1).starts_with("took ");
}
#endif

#ifdef KVQ_WITH_ROCKSDB
TEST(WorkQueueCrash, RocksDbWorkerKilledAndRestartedLosesNothingAndRepeatsNothing) {
  const std::string url = "rocksdb:" + testing::fresh_temp_dir("kvq-wq-crash") + "/db";
  const int n = 400;
  push_items(url, n);
  int killed_holding = 0;
  // Three kills, and more (up to eight) until one came while the worker held a lease: a loaded
  // machine may let the 5 ms of work and the ack pass before the kill lands.
  for (int round = 0; round < 3 || (killed_holding == 0 && round < 8); ++round) {
    testing::Subprocess p(worker(url));
    killed_holding += kill_after_takes(p, 20) ? 1 : 0;
  }
  EXPECT_GE(killed_holding, 1) << "no worker was killed while it held a lease";
  std::string out;
  ASSERT_EQ(testing::run_program(worker(url), &out), 0);
  expect_each_effect_once(url, n);
}
#endif

#ifdef KVQ_WITH_ETCD
TEST(WorkQueueCrash, EtcdWorkerKilledWhileOthersRunLosesNothingAndRepeatsNothing) {
  std::string why;
  const std::string url = testing::fresh_shared_etcd_url("", &why);
  if (url.empty()) GTEST_SKIP() << why;
  const int n = 300;
  push_items(url, n);
  std::vector<std::unique_ptr<testing::Subprocess>> others;
  for (int i = 0; i < 2; ++i) others.push_back(std::make_unique<testing::Subprocess>(worker(url)));
  // Victims one after another while the others run, until one was killed holding a lease (most
  // are: each is killed just after it took one).
  bool killed_holding = false;
  for (int victims = 0; victims < 6 && !killed_holding; ++victims) {
    testing::Subprocess victim(worker(url));
    killed_holding = kill_after_takes(victim, 10);
  }
  EXPECT_TRUE(killed_holding) << "no worker was killed while it held a lease";
  for (auto& p : others) {
    const int status = p->wait();
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  expect_each_effect_once(url, n);
}
#endif

}  // namespace
}  // namespace kvq
