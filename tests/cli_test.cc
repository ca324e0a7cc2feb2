// Runs the built `kvq` binary (env KVQ_CLI, set by tests/CMakeLists.txt) and checks exit codes,
// outputs and one-line errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

namespace {

struct CliRun {
  int status = -1;
  std::string out, err;
};

std::string cli() {
  const char* p = std::getenv("KVQ_CLI");
  return p ? p : "";
}

std::string temp_path(const std::string& tag) {
  std::random_device rd;
  return (std::filesystem::temp_directory_path() /
          ("kvq-cli-test-" + tag + "-" + std::to_string(getpid()) + "-" + std::to_string(rd())))
      .string();
}

// Runs `kvq ARGS` through the shell with stdout/stderr captured into files.
CliRun run(const std::string& args) {
  const std::string out = temp_path("out"), err = temp_path("err");
  const std::string cmd = "KVQ_DB= '" + cli() + "' " + args + " >" + out + " 2>" + err;
  int rc = std::system(cmd.c_str());
  CliRun r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  auto slurp = [](const std::string& path) {
    std::string s;
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      std::array<char, 4096> buf;
      std::size_t n;
      while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) s.append(buf.data(), n);
      std::fclose(f);
    }
    std::filesystem::remove(path);
    return s;
  };
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cli().empty() || !std::filesystem::exists(cli())) GTEST_SKIP() << "KVQ_CLI not set";
  }
};

TEST_F(CliTest, HelpListsSubcommandsAndExitsZero) {
  CliRun r = run("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* s : {"queue", "pq", "dump", "demo", "bench", "--db"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  }
  EXPECT_EQ(run("pq push --help").status, 0);
  EXPECT_EQ(run("bench --help").status, 0);
}

TEST_F(CliTest, HelpSaysWhereTheDefaultDatabaseLives) {
  CliRun r = run("--help");
#ifdef KVQ_WITH_ROCKSDB
  EXPECT_NE(r.out.find("rocksdb:./kvq-data"), std::string::npos) << r.out;
#else
  EXPECT_NE(r.out.find("memory:"), std::string::npos) << r.out;
#endif
}

TEST_F(CliTest, UnknownSubcommandIsOneLineErrorExitTwo) {
  CliRun r = run("--db memory: frobnicate");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("kvq: error:", 0), 0u) << r.err;
}

TEST_F(CliTest, MissingOrBadPriorityIsExitTwo) {
  EXPECT_EQ(run("--db memory: pq push value").status, 2);
  CliRun r = run("--db memory: pq push --priority abc value");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_EQ(run("--db memory: pq push --priority 99999999999999999999 v").status, 2);
}

TEST_F(CliTest, BadDatabaseUrlIsOneLineKvqErrorExitOne) {
  CliRun r = run("--db nonsense://x queue size");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("connection_string_invalid"), std::string::npos) << r.err;
}

TEST_F(CliTest, PopOnEmptyQueueExitsThree) {
  EXPECT_EQ(run("--db memory: queue pop").status, 3);
  EXPECT_EQ(run("--db memory: pq pop-min").status, 3);
  EXPECT_EQ(run("--db memory: pq peek-max").status, 3);
}

TEST_F(CliTest, SizeOfFreshQueueIsZero) {
  CliRun r = run("--db memory: queue size");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "0\n");
  EXPECT_EQ(run("--db memory: pq size").out, "0\n");
}

TEST_F(CliTest, ValueTooLargeIsKvqErrorExitOne) {
  CliRun r = run("--db memory: pq push -p 1 $(head -c 100001 /dev/zero | tr '\\0' x)");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("value_too_large"), std::string::npos) << r.err;
}

TEST_F(CliTest, DemoPassesItsHistoryCheck) {
  CliRun r = run("demo --clients 4 --items 400 --quiet");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("verdict: PASS"), std::string::npos) << r.out;
  CliRun p = run("demo --clients 4 --items 200 --quiet --plain");
  EXPECT_EQ(p.status, 0) << p.out << p.err;
}

TEST_F(CliTest, DemoRejectsBadClientCount) {
  EXPECT_EQ(run("demo --clients 0").status, 2);
  EXPECT_EQ(run("demo --clients x").status, 2);
}

TEST_F(CliTest, BenchShortRunPrintsJson) {
  CliRun r = run("bench --clients 1,2 --seconds 0.05 --prefill 300 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  // push: queue,pq x 2 client counts (plain only); pop: 2 kinds x 2 modes x 2 client counts.
  EXPECT_EQ(j["results"].size(), 4u + 8u);
  for (const auto& row : j["results"]) {
    EXPECT_GT(row["ops"].template get<long>(), 0) << row.dump();
    EXPECT_GE(row["p99_us"].template get<double>(), row["p50_us"].template get<double>());
  }
}

TEST_F(CliTest, BenchRejectsBadClientList) {
  CliRun r = run("bench --clients 1,zero");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_EQ(run("bench --modes fast").status, 2);
}

TEST_F(CliTest, DurableDatabasePersistsAcrossCommands) {
  const std::string dir = temp_path("db");
  const std::string db = "--db rocksdb:" + dir + " ";
  CliRun probe = run(db + "pq size");
  if (probe.status == 1 && probe.err.find("connection_string_invalid") != std::string::npos) {
    GTEST_SKIP() << "rocksdb engine not built";
  }
  ASSERT_EQ(probe.status, 0) << probe.err;
  EXPECT_EQ(run(db + "pq push --priority 5 five").status, 0);
  EXPECT_EQ(run(db + "pq push --priority 1 one").status, 0);
  EXPECT_EQ(run(db + "queue push a b").status, 0);
  EXPECT_EQ(run(db + "pq size").out, "2\n");
  EXPECT_EQ(run(db + "pq pop-min").out, "one\n");
  EXPECT_EQ(run(db + "queue pop").out, "a\n");
  CliRun d = run(db + "dump");
  EXPECT_EQ(d.status, 0);
  EXPECT_NE(d.out.find("(\"P\", \"default\", 5, 0, b\""), std::string::npos) << d.out;
  std::filesystem::remove_all(dir);
}

TEST_F(CliTest, DumpDecodesKeysAsTuples) {
  // memory: lives for one command, so dump of a fresh database prints nothing.
  CliRun r = run("--db memory: dump");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "");
}

}  // namespace
