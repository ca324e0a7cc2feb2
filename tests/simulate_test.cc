// `kvq simulate` (docs/simulation.md): 1,000 seeds of clients on a work Queue, a PriorityQueue or a
// FairQueue under injected faults in simulated time pass the whole-history check, every structure
// is simulated, and a seed replays to the same history in another process.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "support/figures.h"
#include "support/subprocess.h"

namespace kvq {
namespace {

#ifdef KVQ_SANITIZER_BUILD
constexpr const char* kSeeds = "300";  // sanitizers slow each seed 5-20x
#else
constexpr const char* kSeeds = "1000";
#endif

std::string cli() {
  const char* p = std::getenv("KVQ_CLI");
  return p ? p : "";
}

// The line of `output` that starts with `prefix` (after leading spaces), or "".
std::string line_starting(const std::string& output, const std::string& prefix) {
  std::size_t at = output.find("  " + prefix);
  if (at == std::string::npos) return "";
  return output.substr(at + 2, output.find('\n', at) - at - 2);
}

// The figures of a simulate summary (0 for any it lacks).
struct Summary {
  long long seeds = 0, clients = 0, operations = 0, violations = 0;
  long long applied = 0, not_applied = 0, conflicts = 0, too_old = 0;
  long long high_contention_seeds = 0, combining_seeds = 0;
};

Summary parse_summary(const std::string& out) {
  Summary s;
  const std::size_t summary = out.find("kvq simulate: ");
  if (summary == std::string::npos) return s;
  std::sscanf(out.c_str() + summary, "kvq simulate: %lld seeds", &s.seeds);
  std::sscanf(line_starting(out, "clients").c_str(), "clients %lld, operations %lld", &s.clients,
              &s.operations);
  std::sscanf(line_starting(out, "faults:").c_str(),
              "faults: commit_unknown_result applied %lld, not applied %lld, spurious "
              "not_committed %lld, transaction_too_old %lld",
              &s.applied, &s.not_applied, &s.conflicts, &s.too_old);
  std::sscanf(line_starting(out, "high-contention seeds").c_str(),
              "high-contention seeds %lld, combining seeds %lld", &s.high_contention_seeds,
              &s.combining_seeds);
  std::sscanf(line_starting(out, "violations").c_str(), "violations %lld", &s.violations);
  return s;
}

// Records the summary's figures (tests/support/figures.h): seeds, operations, faults by kind and
// violations, into the same rows as the other tests' faults and history checks.
void record_summary(const Summary& s) {
  testing::record_figure("simulation: seeds, each run twice", s.seeds);
  testing::record_figure("simulation: operations", s.operations);
  testing::record_figure(testing::kOperationsChecked, s.operations);
  testing::record_figure(testing::kViolations, s.violations);
  testing::record_fault_counts(s.applied, s.not_applied, s.conflicts, s.too_old);
}

class SimulateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cli().empty() || !std::filesystem::exists(cli())) GTEST_SKIP() << "KVQ_CLI not set";
  }
  int simulate(const std::vector<std::string>& args, std::string* output) {
    std::vector<std::string> argv{cli(), "simulate"};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::run_program(argv, output);
  }
};

TEST_F(SimulateTest, ManySeedsPassTheHistoryCheck) {
  std::string out;
  EXPECT_EQ(simulate({"--seeds", kSeeds}, &out), 0) << out;
  std::printf("%s", out.c_str());
  const Summary summary = parse_summary(out);
  record_summary(summary);
  EXPECT_NE(out.find("violations 0; failed seeds 0 (nondeterministic 0): PASS"), std::string::npos)
      << out;
  // Every kind of fault was injected, and seeds ran high-contention and combined clients.
  EXPECT_GT(summary.applied, 0) << out;
  EXPECT_GT(summary.not_applied, 0) << out;
  EXPECT_GT(summary.conflicts, 0) << out;
  EXPECT_GT(summary.too_old, 0) << out;
  EXPECT_GT(summary.high_contention_seeds, 0) << out;
  EXPECT_GT(summary.combining_seeds, 0) << out;
  long long queues = 0, priority_queues = 0, fair_queues = 0;
  std::sscanf(line_starting(out, "structures:").c_str(),
              "structures: Queue %lld seeds, PriorityQueue %lld, FairQueue %lld", &queues,
              &priority_queues, &fair_queues);
  EXPECT_GT(queues, 0) << out;
  EXPECT_GT(priority_queues, 0) << out;
  EXPECT_GT(fair_queues, 0) << out;
}

TEST_F(SimulateTest, ASeedReplaysToTheSameHistoryInAnotherProcess) {
  std::string first, again, other;
  ASSERT_EQ(simulate({"--seed", "42"}, &first), 0) << first;
  ASSERT_EQ(simulate({"--seed", "42"}, &again), 0) << again;
  ASSERT_EQ(simulate({"--seed", "43"}, &other), 0) << other;
  const std::string digest = line_starting(first, "digest");
  ASSERT_FALSE(digest.empty()) << first;
  EXPECT_EQ(digest, line_starting(again, "digest"));
  EXPECT_NE(digest, line_starting(other, "digest"));
  EXPECT_NE(first.find("1 seeds (42..42)"), std::string::npos) << first;
}

}  // namespace
}  // namespace kvq
