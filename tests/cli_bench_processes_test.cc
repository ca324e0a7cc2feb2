// `kvq bench --processes` on a real etcd (tests/support/etcd_cluster.h): the built `kvq` binary
// (env KVQ_CLI) runs each measurement in worker processes started together on one queue, and
// prints one row per measurement with `processes` and the clients of all processes. (That
// --processes is refused on memory: and rocksdb: is in cli_test.cc's table of bad command lines;
// that several processes of several threads pop one queue exactly once is etcd_multiprocess_test.)
#ifdef KVQ_WITH_ETCD
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "support/etcd_cluster.h"
#include "support/subprocess.h"

namespace kvq {
namespace {

class CliBenchProcessesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* cli = std::getenv("KVQ_CLI");
    if (cli == nullptr || *cli == '\0') GTEST_SKIP() << "KVQ_CLI not set";
    cli_ = cli;
    std::string why;
    url_ = testing::fresh_shared_etcd_url("", &why);
    if (url_.empty()) GTEST_SKIP() << "no etcd: " << why;
  }

  // Runs `kvq --db URL ARGS` through the shell, stdin from /dev/null; stdout (and stderr too if
  // `with_stderr`) into *out; returns the exit status.
  int kvq(const std::string& args, std::string* out, bool with_stderr = false) const {
    const std::string cmd =
        "'" + cli_ + "' --db '" + url_ + "' " + args + " </dev/null" + (with_stderr ? " 2>&1" : "");
    return testing::run_program({"/bin/sh", "-c", cmd}, out);
  }

  std::string cli_, url_;
};

TEST_F(CliBenchProcessesTest, TwoProcessesOfTwoThreadsPopOneQueueAndReportOneRowEach) {
  std::string out;
  ASSERT_EQ(kvq("bench --processes 2 --clients 2 --ops pop --modes hc --seconds 0.5 "
                "--prefill 2000 --json",
                &out),
            0)
      << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["processes"], 2);
  ASSERT_EQ(j["results"].size(), 2u) << out;  // queue and pq
  for (const auto& row : j["results"]) {
    EXPECT_EQ(row["processes"], 2) << row.dump();
    EXPECT_EQ(row["clients"], 4) << row.dump();
    EXPECT_EQ(row["mode"], "hc") << row.dump();
    EXPECT_GT(row["ops"].get<long>(), 0) << row.dump();
    EXPECT_GT(row["cpu_us_per_op"].get<double>(), 0) << row.dump();
    EXPECT_GE(row["p99_us"].get<double>(), row["p50_us"].get<double>()) << row.dump();
  }
}

TEST_F(CliBenchProcessesTest, AWorkerThatIsNeverStartedRunsNothingAndFails) {
  std::string out;
  EXPECT_EQ(kvq("bench --worker 0 --kinds queue --modes hc --ops pop --clients 2", &out, true), 1);
  EXPECT_EQ(out, "ready\nkvq: error: bench: worker: stdin closed before the start signal\n");
}

}  // namespace
}  // namespace kvq
#endif  // KVQ_WITH_ETCD
