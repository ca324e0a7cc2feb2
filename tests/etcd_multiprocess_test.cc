// Several OS processes push and pop on one etcd-backed queue at once; the merged history (every
// client logs each acknowledged push and each pop's result) shows no loss and no duplicate. The
// workers are this test binary re-executed with KVQ_ETCD_MP_URL set: single-threaded workers on a
// PriorityQueue, and workers of several threads each on a high-contention Queue and on a
// high-contention FairQueue (half of them combining their threads' operations), whose pops also
// come out in push order (per tenant: each thread pushes to a tenant of its own).
#ifdef KVQ_WITH_ETCD
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kvq/kvq.h"
#include "support/engines.h"
#include "support/etcd_cluster.h"

extern char** environ;

namespace kvq {
namespace {

constexpr int kProcesses = 4;
constexpr int kItemsPerProcess = 150;
// The high-contention case: kProcesses processes of kThreads threads, each pushing and popping.
constexpr int kThreads = 4;
constexpr int kItemsPerThread = 100;

PriorityQueue queue_on(const std::shared_ptr<Database>& db) {
  return PriorityQueue(db, Subspace(Tuple().append("mp")));
}

// The high-contention Queue of worker `id` (even ids combine their threads' operations).
Queue hc_queue_on(const std::shared_ptr<Database>& db, int id) {
  QueueOptions options;
  options.high_contention = true;
  options.combine = id % 2 == 0;
  return Queue(db, Subspace(Tuple().append("mp-hc")), options);
}

// The high-contention FairQueue of worker `id` (even ids combine their threads' pops).
FairQueue hc_fair_queue_on(const std::shared_ptr<Database>& db, int id) {
  FairQueueOptions options;
  options.high_contention = true;
  options.combine = id % 2 == 0;
  return FairQueue(db, Subspace(Tuple().append("mp-fair")), options);
}

// The value of fq.pop()'s item.
std::optional<std::string> pop_value(FairQueue& fq) {
  std::optional<FairItem> item = fq.pop();
  if (!item) return std::nullopt;
  return std::move(item->value);
}

// The worker's settings, or nullptr if this process is not a worker.
struct WorkerEnv {
  const char* url = std::getenv("KVQ_ETCD_MP_URL");
  const char* id = std::getenv("KVQ_ETCD_MP_ID");
  const char* out = std::getenv("KVQ_ETCD_MP_OUT");  // the log's path, without ".log"
  bool given() const { return url != nullptr && id != nullptr && out != nullptr; }
};

// Worker mode: pushes kItemsPerProcess items (random priorities) and pops after each push,
// logging "push V" once a push returned and "pop V" / "pop -" once a pop returned.
TEST(EtcdMultiProcess, Worker) {
  const WorkerEnv env;
  if (!env.given()) GTEST_SKIP() << "worker process of FourProcessesShareOnePriorityQueue";
  auto db = open(env.url);
  PriorityQueue pq = queue_on(db);
  std::FILE* log = std::fopen((std::string(env.out) + ".log").c_str(), "w");
  ASSERT_NE(log, nullptr);
  std::mt19937 gen(static_cast<unsigned>(std::atoi(env.id)) * 7919u + 1);
  for (int i = 0; i < kItemsPerProcess; ++i) {
    const std::string value = std::string("w") + env.id + "-" + std::to_string(i);
    pq.push(value, static_cast<std::int64_t>(gen() % 10));
    std::fprintf(log, "push %s\n", value.c_str());
    std::fflush(log);
    if (gen() % 3 != 0) {
      std::optional<std::string> v = gen() % 2 ? pq.pop_min() : pq.pop_max();
      std::fprintf(log, "pop %s\n", v ? v->c_str() : "-");
      std::fflush(log);
    }
  }
  std::fclose(log);
}

// Worker mode of the high-contention cases: kThreads threads, each pushing kItemsPerThread items
// with push(thread's tag, value) and popping after each push with pop(), one log per thread
// ("push V", "pop V" / "pop -").
void run_hc_worker(
    const std::function<void(const std::string& tag, const std::string& value)>& push,
    const std::function<std::optional<std::string>()>& pop) {
  const WorkerEnv env;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string tag = std::string("w") + env.id + "t" + std::to_string(t);
      std::FILE* log =
          std::fopen((std::string(env.out) + "-" + std::to_string(t) + ".log").c_str(), "w");
      if (log == nullptr) std::abort();
      for (int i = 0; i < kItemsPerThread; ++i) {
        const std::string value = tag + "-" + std::to_string(i);
        push(tag, value);
        std::fprintf(log, "push %s\n", value.c_str());
        std::optional<std::string> v = pop();
        std::fprintf(log, "pop %s\n", v ? v->c_str() : "-");
        std::fflush(log);
      }
      std::fclose(log);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(EtcdMultiProcess, HighContentionWorker) {
  const WorkerEnv env;
  if (!env.given()) GTEST_SKIP() << "worker process of the high-contention multi-process test";
  auto db = open(env.url);
  Queue q = hc_queue_on(db, std::atoi(env.id));
  run_hc_worker([&](const std::string&, const std::string& value) { q.push(value); },
                [&] { return q.pop(); });
}

// Each thread pushes to the tenant named by its tag.
TEST(EtcdMultiProcess, HighContentionFairWorker) {
  const WorkerEnv env;
  if (!env.given()) GTEST_SKIP() << "worker process of the high-contention fair queue test";
  auto db = open(env.url);
  FairQueue fq = hc_fair_queue_on(db, std::atoi(env.id));
  run_hc_worker([&](const std::string& tag, const std::string& value) { fq.push(tag, value); },
                [&] { return pop_value(fq); });
}

// Starts kProcesses workers (this binary, running test `worker_test` of EtcdMultiProcess) on
// `url`, logging under `dir`, and waits for them; each must exit with status 0.
void run_workers(const std::string& worker_test, const std::string& url, const std::string& dir) {
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcesses; ++p) {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    env_strings.push_back("KVQ_ETCD_MP_URL=" + url);
    env_strings.push_back("KVQ_ETCD_MP_ID=" + std::to_string(p));
    env_strings.push_back("KVQ_ETCD_MP_OUT=" + dir + "/" + std::to_string(p));
    std::vector<char*> envp;
    for (std::string& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string self = "/proc/self/exe";
    std::string filter = "--gtest_filter=EtcdMultiProcess." + worker_test;
    char* argv[] = {self.data(), filter.data(), nullptr};
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp.data()), 0);
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "worker " << pid << " failed";
  }
}

// The merged logs of a run, and the items left in the queue after it.
struct History {
  std::set<std::string> pushed;
  std::map<std::string, int> popped;
  std::set<std::string> left;
  std::vector<std::vector<std::string>> pops_by_client;  // each log's pops, in its order
};

// Reads every log in `dir`, then drains what is left with `pop`.
History read_history(const std::string& dir,
                     const std::function<std::optional<std::string>()>& pop) {
  History h;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    h.pops_by_client.emplace_back();
    std::string op, value;
    while (in >> op >> value) {
      if (op == "push") {
        EXPECT_TRUE(h.pushed.insert(value).second) << "pushed twice: " << value;
      } else if (value != "-") {
        h.popped[value]++;
        h.pops_by_client.back().push_back(value);
      }
    }
  }
  while (auto v = pop()) EXPECT_TRUE(h.left.insert(*v).second) << "left twice: " << *v;
  return h;
}

// Every item pushed once, and popped exactly once or still queued; nothing else popped.
void expect_exactly_once(const History& h, std::size_t expected_pushes) {
  EXPECT_EQ(h.pushed.size(), expected_pushes);
  EXPECT_GT(h.popped.size(), 0u);
  for (const auto& [value, times] : h.popped) {
    EXPECT_EQ(times, 1) << value << " popped " << times << " times";
    EXPECT_TRUE(h.pushed.count(value)) << value << " popped but never pushed";
    EXPECT_FALSE(h.left.count(value)) << value << " popped and still queued";
  }
  for (const std::string& value : h.pushed) {
    EXPECT_TRUE(h.popped.count(value) || h.left.count(value)) << value << " lost";
  }
  EXPECT_EQ(h.popped.size() + h.left.size(), h.pushed.size());
}

// FIFO as one popper sees it: the items of one pushing thread ("w0t1-5": pushed one after
// another) that one client popped come in push order.
void expect_push_order_per_popper(const History& h) {
  for (const auto& pops : h.pops_by_client) {
    std::map<std::string, int> last;  // pusher tag -> index of the last item popped from it
    for (const std::string& value : pops) {
      const std::size_t dash = value.rfind('-');
      const std::string pusher = value.substr(0, dash);
      const int index = std::stoi(value.substr(dash + 1));
      auto [it, first] = last.emplace(pusher, index);
      if (!first) {
        EXPECT_GT(index, it->second) << value << " popped after item " << it->second;
        it->second = index;
      }
    }
  }
}

TEST(EtcdMultiProcess, FourProcessesShareOnePriorityQueueWithoutLossOrDuplicates) {
  std::string why;
  const std::string url = testing::fresh_shared_etcd_url("", &why);
  if (url.empty()) GTEST_SKIP() << "no etcd: " << why;
  const std::string dir = testing::fresh_temp_dir("kvq-mp");
  run_workers("Worker", url, dir);
  auto db = open(url);
  PriorityQueue pq = queue_on(db);
  const History h = read_history(dir, [&] { return pq.pop_min(); });
  expect_exactly_once(h, kProcesses * kItemsPerProcess);
}

TEST(EtcdMultiProcess, FourProcessesOfFourThreadsPopOneHighContentionQueueExactlyOnceInOrder) {
  std::string why;
  const std::string url = testing::fresh_shared_etcd_url("", &why);
  if (url.empty()) GTEST_SKIP() << "no etcd: " << why;
  const std::string dir = testing::fresh_temp_dir("kvq-mp-hc");
  run_workers("HighContentionWorker", url, dir);
  auto db = open(url);
  Queue q = hc_queue_on(db, 1);
  const History h = read_history(dir, [&] { return q.pop(); });
  expect_exactly_once(h, kProcesses * kThreads * kItemsPerThread);
  expect_push_order_per_popper(h);
}

TEST(EtcdMultiProcess, FourProcessesOfFourThreadsPopOneHighContentionFairQueueExactlyOnceInOrder) {
  std::string why;
  const std::string url = testing::fresh_shared_etcd_url("", &why);
  if (url.empty()) GTEST_SKIP() << "no etcd: " << why;
  const std::string dir = testing::fresh_temp_dir("kvq-mp-fair");
  run_workers("HighContentionFairWorker", url, dir);
  auto db = open(url);
  FairQueue fq = hc_fair_queue_on(db, 1);
  const History h = read_history(dir, [&] { return pop_value(fq); });
  expect_exactly_once(h, kProcesses * kThreads * kItemsPerThread);
  expect_push_order_per_popper(h);
  EXPECT_EQ(fq.size(), 0);
}

}  // namespace
}  // namespace kvq
#endif  // KVQ_WITH_ETCD
