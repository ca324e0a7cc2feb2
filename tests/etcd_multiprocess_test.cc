// Several OS processes push and pop on one etcd-backed PriorityQueue at once; the merged history
// (every process logs each acknowledged push and each pop's result) shows no loss and no
// duplicate. The workers are this test binary re-executed with KVQ_ETCD_MP_URL set.
#ifdef KVQ_WITH_ETCD
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kvq/kvq.h"
#include "support/engines.h"
#include "support/etcd_cluster.h"

extern char** environ;

namespace kvq {
namespace {

constexpr int kProcesses = 4;
constexpr int kItemsPerProcess = 150;

PriorityQueue queue_on(const std::shared_ptr<Database>& db) {
  return PriorityQueue(db, Subspace(Tuple().append("mp")));
}

// Worker mode: pushes kItemsPerProcess items (random priorities) and pops after each push,
// logging "push V" once a push returned and "pop V" / "pop -" once a pop returned.
TEST(EtcdMultiProcess, Worker) {
  const char* url = std::getenv("KVQ_ETCD_MP_URL");
  const char* id = std::getenv("KVQ_ETCD_MP_ID");
  const char* out = std::getenv("KVQ_ETCD_MP_OUT");
  if (url == nullptr || id == nullptr || out == nullptr) {
    GTEST_SKIP() << "worker process of FourProcessesShareOnePriorityQueue (not run directly)";
  }
  auto db = open(url);
  PriorityQueue pq = queue_on(db);
  std::FILE* log = std::fopen(out, "w");
  ASSERT_NE(log, nullptr);
  std::mt19937 gen(static_cast<unsigned>(std::atoi(id)) * 7919u + 1);
  for (int i = 0; i < kItemsPerProcess; ++i) {
    const std::string value = std::string("w") + id + "-" + std::to_string(i);
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

TEST(EtcdMultiProcess, FourProcessesShareOnePriorityQueueWithoutLossOrDuplicates) {
  std::string why;
  const std::string url = testing::fresh_shared_etcd_url("", &why);
  if (url.empty()) GTEST_SKIP() << "no etcd: " << why;
  const std::string dir = testing::fresh_temp_dir("kvq-mp");

  std::vector<pid_t> pids;
  for (int p = 0; p < kProcesses; ++p) {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    env_strings.push_back("KVQ_ETCD_MP_URL=" + url);
    env_strings.push_back("KVQ_ETCD_MP_ID=" + std::to_string(p));
    env_strings.push_back("KVQ_ETCD_MP_OUT=" + dir + "/" + std::to_string(p) + ".log");
    std::vector<char*> envp;
    for (std::string& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string self = "/proc/self/exe";
    std::string filter = "--gtest_filter=EtcdMultiProcess.Worker";
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

  // Merge the histories, then drain what is left.
  std::set<std::string> pushed;
  std::map<std::string, int> popped;
  for (int p = 0; p < kProcesses; ++p) {
    std::ifstream in(dir + "/" + std::to_string(p) + ".log");
    std::string op, value;
    while (in >> op >> value) {
      if (op == "push") {
        EXPECT_TRUE(pushed.insert(value).second) << "pushed twice: " << value;
      } else if (value != "-") {
        popped[value]++;
      }
    }
  }
  auto db = open(url);
  PriorityQueue pq = queue_on(db);
  std::set<std::string> left;
  while (auto v = pq.pop_min()) EXPECT_TRUE(left.insert(*v).second) << "left twice: " << *v;

  EXPECT_EQ(pushed.size(), static_cast<std::size_t>(kProcesses * kItemsPerProcess));
  EXPECT_GT(popped.size(), 0u);
  for (const auto& [value, times] : popped) {
    EXPECT_EQ(times, 1) << value << " popped " << times << " times";
    EXPECT_TRUE(pushed.count(value)) << value << " popped but never pushed";
    EXPECT_FALSE(left.count(value)) << value << " popped and still queued";
  }
  for (const std::string& value : pushed) {
    EXPECT_TRUE(popped.count(value) || left.count(value)) << value << " lost";
  }
  EXPECT_EQ(popped.size() + left.size(), pushed.size());
}

}  // namespace
}  // namespace kvq
#endif  // KVQ_WITH_ETCD
