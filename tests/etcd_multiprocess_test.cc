// Several OS processes push and pop on one etcd-backed queue at once. Every client logs each
// acknowledged push and each pop's result with the steady-clock interval it ran in (the clock is
// CLOCK_MONOTONIC, one for every process of the machine), so the merged history is checked as the
// threads' histories of one process are (tools/kvq/history.h): nothing lost, nothing twice, and
// order against real time across processes: priority order for pop_min / pop_max, FIFO for the
// Queue, FIFO within each tenant for the FairQueue, and no pop answered empty while an item was
// queued throughout it. The workers are this test binary re-executed with KVQ_ETCD_MP_URL set:
// single-threaded workers on a PriorityQueue, and workers of several threads each on a
// high-contention Queue and on a high-contention FairQueue (half of them combining their threads'
// operations; each thread pushes to a tenant of its own).
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
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kvq/kvq.h"
#include "support/engines.h"
#include "support/etcd_cluster.h"
#include "support/figures.h"
#include "tools/kvq/history.h"

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

// One log line per operation: "push VALUE PRIORITY START END" once a push returned, "pop KIND
// VALUE START END" once a pop returned (KIND: fifo, min, max or any; VALUE "-" for none), times in
// steady-clock nanoseconds.
void log_push(std::FILE* log, const std::string& value, std::int64_t priority, std::int64_t start) {
  std::fprintf(log, "push %s %lld %lld %lld\n", value.c_str(), static_cast<long long>(priority),
               static_cast<long long>(start), static_cast<long long>(history::now_ns()));
  std::fflush(log);
}

void log_pop(std::FILE* log, const char* kind, const std::optional<std::string>& value,
             std::int64_t start) {
  std::fprintf(log, "pop %s %s %lld %lld\n", kind, value ? value->c_str() : "-",
               static_cast<long long>(start), static_cast<long long>(history::now_ns()));
  std::fflush(log);
}

// Worker mode: pushes kItemsPerProcess items (random priorities) and pops (pop_min or pop_max)
// after two pushes in three, logging each.
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
    const auto priority = static_cast<std::int64_t>(gen() % 10);
    std::int64_t start = history::now_ns();
    pq.push(value, priority);
    log_push(log, value, priority, start);
    if (gen() % 3 != 0) {
      const bool min = gen() % 2 != 0;
      start = history::now_ns();
      std::optional<std::string> v = min ? pq.pop_min() : pq.pop_max();
      log_pop(log, min ? "min" : "max", v, start);
    }
  }
  std::fclose(log);
}

// Worker mode of the high-contention cases: kThreads threads, each pushing kItemsPerThread items
// with push(thread's tag, value) and popping after each push with pop(), one log per thread (pops
// logged as `pop_kind`).
void run_hc_worker(
    const std::function<void(const std::string& tag, const std::string& value)>& push,
    const std::function<std::optional<std::string>()>& pop, const char* pop_kind) {
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
        std::int64_t start = history::now_ns();
        push(tag, value);
        log_push(log, value, 0, start);
        start = history::now_ns();
        std::optional<std::string> v = pop();
        log_pop(log, pop_kind, v, start);
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
                [&] { return q.pop(); }, "fifo");
}

// Each thread pushes to the tenant named by its tag.
TEST(EtcdMultiProcess, HighContentionFairWorker) {
  const WorkerEnv env;
  if (!env.given()) GTEST_SKIP() << "worker process of the high-contention fair queue test";
  auto db = open(env.url);
  FairQueue fq = hc_fair_queue_on(db, std::atoi(env.id));
  // "any": across tenants a fair queue promises turns, not FIFO (checked per tenant instead).
  run_hc_worker([&](const std::string& tag, const std::string& value) { fq.push(tag, value); },
                [&] { return pop_value(fq); }, "any");
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

// The merged logs of a run, then the pops that drained the queue after it.
struct History {
  std::vector<history::Push> pushes;
  std::vector<history::Pop> pops;
};

history::PopKind pop_kind(const std::string& name) {
  if (name == "min") return history::PopKind::kMin;
  if (name == "max") return history::PopKind::kMax;
  if (name == "any") return history::PopKind::kAny;
  EXPECT_EQ(name, "fifo") << "a pop kind the workers do not log";
  return history::PopKind::kFifo;
}

// Reads every log in `dir`, then drains what is left with `drain`, recording those pops as
// `drain_kind` pops (the last one finds the queue empty).
History read_history(const std::string& dir,
                     const std::function<std::optional<std::string>()>& drain,
                     history::PopKind drain_kind) {
  History h;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    std::string op;
    while (in >> op) {
      if (op == "push") {
        history::Push p;
        in >> p.value >> p.priority >> p.start >> p.end;
        h.pushes.push_back(std::move(p));
      } else {
        EXPECT_EQ(op, "pop") << entry.path();
        std::string kind, value;
        history::Pop p;
        in >> kind >> value >> p.start >> p.end;
        p.kind = pop_kind(kind);
        if (value != "-") p.value = std::move(value);
        h.pops.push_back(std::move(p));
      }
      EXPECT_TRUE(in) << "a truncated line in " << entry.path();
    }
  }
  for (bool more = true; more;) {
    history::Pop p{drain_kind, std::nullopt, history::now_ns(), 0};
    p.value = drain();
    p.end = history::now_ns();
    more = p.value.has_value();
    h.pops.push_back(std::move(p));
  }
  return h;
}

// The whole-history check (tools/kvq/history.h) of `h`, with `expected_pushes` pushes logged:
// each popped exactly once, in the order the pops' kinds promise.
void expect_history_ok(const History& h, std::size_t expected_pushes) {
  EXPECT_EQ(h.pushes.size(), expected_pushes);
  const history::Result r = history::check(h.pushes, h.pops);
  testing::record_history(r);
  EXPECT_EQ(r.popped, r.pushed);
  EXPECT_TRUE(r.ok) << r.violations << " violations, first: " << r.problems.front();
}

TEST(EtcdMultiProcess, FourProcessesShareOnePriorityQueueWithoutLossOrDuplicates) {
  std::string why;
  const std::string url = testing::fresh_shared_etcd_url("", &why);
  if (url.empty()) GTEST_SKIP() << "no etcd: " << why;
  const std::string dir = testing::fresh_temp_dir("kvq-mp");
  run_workers("Worker", url, dir);
  auto db = open(url);
  PriorityQueue pq = queue_on(db);
  const History h = read_history(
      dir, [&] { return pq.pop_min(); }, history::PopKind::kMin);
  expect_history_ok(h, kProcesses * kItemsPerProcess);
}

TEST(EtcdMultiProcess, FourProcessesOfFourThreadsPopOneHighContentionQueueExactlyOnceInOrder) {
  std::string why;
  const std::string url = testing::fresh_shared_etcd_url("", &why);
  if (url.empty()) GTEST_SKIP() << "no etcd: " << why;
  const std::string dir = testing::fresh_temp_dir("kvq-mp-hc");
  run_workers("HighContentionWorker", url, dir);
  auto db = open(url);
  Queue q = hc_queue_on(db, 1);
  const History h = read_history(
      dir, [&] { return q.pop(); }, history::PopKind::kFifo);
  expect_history_ok(h, kProcesses * kThreads * kItemsPerThread);
}

TEST(EtcdMultiProcess, FourProcessesOfFourThreadsPopOneHighContentionFairQueueExactlyOnceInOrder) {
  std::string why;
  const std::string url = testing::fresh_shared_etcd_url("", &why);
  if (url.empty()) GTEST_SKIP() << "no etcd: " << why;
  const std::string dir = testing::fresh_temp_dir("kvq-mp-fair");
  run_workers("HighContentionFairWorker", url, dir);
  auto db = open(url);
  FairQueue fq = hc_fair_queue_on(db, 1);
  const History h = read_history(
      dir, [&] { return pop_value(fq); }, history::PopKind::kAny);
  expect_history_ok(h, kProcesses * kThreads * kItemsPerThread);
  // FIFO within each tenant (a thread's tag: "w0t1-5" is tenant w0t1's), against real time.
  std::vector<history::Pop> fifo_pops = h.pops;
  for (history::Pop& p : fifo_pops) p.kind = history::PopKind::kFifo;
  const auto tenant_of = [](const history::Push& p) {
    return p.value.substr(0, p.value.rfind('-'));
  };
  for (const history::Result& r : history::check_fifo_within(h.pushes, fifo_pops, tenant_of)) {
    EXPECT_TRUE(r.ok) << r.violations
                      << " FIFO violations within a tenant, first: " << r.problems.front();
  }
  EXPECT_EQ(fq.size(), 0);
}

}  // namespace
}  // namespace kvq
#endif  // KVQ_WITH_ETCD
