// Worker processes killed with SIGKILL while holding leases (tests/workers/work_queue_worker.cc):
// on RocksDB by killing and restarting the one process that may open the database, on etcd with
// several workers at once of which one is killed. Every item's effect (written in the ack's
// transaction) is applied exactly once: none lost, none twice.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <string>
#include <thread>
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

void kill_after(testing::Subprocess& p, std::chrono::milliseconds after) {
  ASSERT_EQ(p.read_line(30s), "ready");
  std::this_thread::sleep_for(after);
  p.kill(SIGKILL);
  testing::record_figure(testing::kClientProcessKills, 1);
  const int status = p.wait();
  ASSERT_TRUE(WIFSIGNALED(status)) << "the worker finished before it was killed: " << status;
}
#endif

#ifdef KVQ_WITH_ROCKSDB
TEST(WorkQueueCrash, RocksDbWorkerKilledAndRestartedLosesNothingAndRepeatsNothing) {
  const std::string url = "rocksdb:" + testing::fresh_temp_dir("kvq-wq-crash") + "/db";
  const int n = 400;
  push_items(url, n);
  for (int round = 0; round < 3; ++round) {
    testing::Subprocess p(worker(url));
    kill_after(p, 150ms);
  }
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
  testing::Subprocess victim(worker(url));
  std::vector<std::unique_ptr<testing::Subprocess>> others;
  for (int i = 0; i < 2; ++i) others.push_back(std::make_unique<testing::Subprocess>(worker(url)));
  kill_after(victim, 300ms);
  for (auto& p : others) {
    const int status = p->wait();
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  expect_each_effect_once(url, n);
}
#endif

}  // namespace
}  // namespace kvq
