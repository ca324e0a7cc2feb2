// Runs the built `kvq` binary (env KVQ_CLI, set by tests/CMakeLists.txt) and checks exit codes,
// outputs and one-line errors. The table test gives every subcommand missing, extra and malformed
// arguments and checks: one line on stderr, the documented exit status (2 bad arguments, 1 kvq
// error, 3 empty), and nothing written to the database (its dump is unchanged).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/figures.h"

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

// Runs `kvq ARGS` through the shell with stdout/stderr captured into files and stdin from
// `stdin_path` (default: /dev/null); stdout goes to `stdout_path` instead if one is given. With
// `limit_s` > 0, kvq is killed after that many seconds (status 137).
CliRun run(const std::string& args, const std::string& stdin_path = "/dev/null",
           const std::string& stdout_path = "", int limit_s = 0) {
  const std::string out = temp_path("out"), err = temp_path("err");
  const std::string limit = limit_s > 0 ? "timeout -s KILL " + std::to_string(limit_s) + " " : "";
  const std::string cmd = "KVQ_DB= " + limit + "'" + cli() + "' " + args + " <'" + stdin_path +
                          "' >" + (stdout_path.empty() ? out : stdout_path) + " 2>" + err;
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

// The first line of `out` (without its newline): a take's lease token, for one.
std::string first_line(const std::string& out) { return out.substr(0, out.find('\n')); }

// Writes `bytes` to a fresh temporary file and returns its path (removed by the caller).
std::string write_temp(const std::string& tag, const std::string& bytes) {
  const std::string path = temp_path(tag);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  return path;
}

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(gen() & 0xff);
  return s;
}

// A database URL for a test: a fresh RocksDB directory (persists across commands, so what a
// command wrote can be checked with the next one), or memory: where RocksDB is not built.
class TestDb {
 public:
  TestDb() : dir_(temp_path("db")) {}
  ~TestDb() { std::filesystem::remove_all(dir_); }
  static constexpr bool kDurable =
#ifdef KVQ_WITH_ROCKSDB
      true;
#else
      false;
#endif
  std::string url() const { return kDurable ? "rocksdb:" + dir_ : "memory:"; }
  std::string flag() const { return "--db " + url(); }

 private:
  std::string dir_;
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cli().empty() || !std::filesystem::exists(cli())) GTEST_SKIP() << "KVQ_CLI not set";
  }
};

// One bad command line: {db} stands for "--db URL" of the test database, {big} for a
// 100,001-byte argument; stdin is "big" (100,001 bytes), "small" or "" (/dev/null).
struct BadCase {
  std::string args;
  int status;
  std::string err_has;  // a part of the one stderr line
  std::string stdin_kind = "";
};

const std::vector<BadCase>& bad_cases() {
  static const std::vector<BadCase> cases = {
      // Commands: missing, unknown (named), at every level.
      {"", 2, "a command is required: queue, pq, fair, dump, demo, bench"},
      {"frob", 2, "unknown command 'frob'"},
      {"{db} frob", 2, "unknown command 'frob'"},
      {"queue {db}", 2, "queue: a command is required: push, pop"},
      {"queue frob {db}", 2, "unknown command 'frob'"},
      {"pq {db}", 2, "pq: a command is required: push, pop-min"},
      {"pq pop {db}", 2, "unknown command 'pop'"},
      // Global options: checked wherever they are; an empty --db is refused.
      {"--db '' queue size", 2, "--db: must not be empty"},
      {"queue size --db ''", 2, "--db: must not be empty"},
      {"queue size --db", 2, "--db"},
      {"--db nonsense://x queue size", 2,
       "queue size: connection_string_invalid (2104): 'nonsense://x'"},
      {"queue size --db nonsense://x", 2,
       "queue size: connection_string_invalid (2104): 'nonsense://x'"},
      {"--bogus {db} queue size", 2, "unknown option '--bogus'"},
      // A command's option before the command's word: named as such, not as unknown or missing.
      {"{db} pq --priority 1 push v", 2,
       "pq push: --priority is an option of 'push': it goes after"},
      {"{db} pq -p 1 push v", 2, "pq push: -p is an option of 'push'"},
      {"{db} fair --tenant t push v", 2, "fair push: --tenant is an option of 'push'"},
      {"{db} fair --tenant=t ack TFVDSw", 2, "fair ack: --tenant is an option of 'ack'"},
      {"{db} fair --tenant t pop", 2, "fair pop: unknown option '--tenant'"},
      {"{db} queue --vt 5s take", 2, "queue take: --vt is an option of 'take'"},
      {"queue pop --bogus {db}", 2, "queue pop: unknown option '--bogus'"},
      {"queue --name '' size {db}", 2, "--name: must not be empty"},
      // queue
      {"{db} queue push", 2, "queue push: value is required"},
      {"{db} queue push a {big}", 1, "value_too_large (2103): queue push: value 2 of 2"},
      {"{db} queue push -", 1, "value_too_large (2103): queue push: the value (read from stdin)",
       "big"},
      {"{db} queue push - a -", 2, "'-' (stdin) may be given only once", "small"},
      {"{db} queue push -", 1, "queue push: cannot read the value from stdin (Is a directory)",
       "directory"},
      {"{db} queue pop extra", 2, "queue pop: unexpected argument 'extra'"},
      // One command a level: a second one (which CLI11 started, and only the last ran) is refused.
      {"{db} queue peek clear", 2, "queue peek: unexpected argument 'clear'"},
      {"{db} queue size pop", 2, "queue size: unexpected argument 'pop'"},
      {"{db} pq push -p 1 v queue clear", 2, "pq push: unexpected argument 'queue'"},
      {"{db} dump queue clear", 2, "dump: unexpected argument 'queue'"},
      {"{db} pq take-min --json stats", 2, "pq take-min: unexpected argument 'stats'"},
      {"{db} queue pop --timeout 5", 2, "--timeout: Missing mandatory unit"},
      {"{db} queue pop --timeout 5parsecs", 2, "--timeout"},
      {"{db} queue pop --timeout -1s", 2, "--timeout"},
      {"{db} queue pop --wait 5", 2, "--wait: Missing mandatory unit"},
      {"{db} queue pop --wait -1s", 2, "--wait"},
      {"{db} queue pop --count 0", 2, "--count: must be >= 1, not 0"},
      {"{db} queue pop --count 0x2", 2, "--count: '0x2' is not an integer"},
      {"{db} queue pop -n 2 --raw", 2, "--raw excludes --count"},
      {"{db} queue pop -n x", 2, "--count"},
      {"{db} queue pop --timeout 1s --wait 1s", 2, "--timeout excludes --wait"},
      {"{db} queue peek extra", 2, "queue peek: unexpected argument 'extra'"},
      {"{db} queue size extra", 2, "queue size: unexpected argument 'extra'"},
      {"{db} queue clear extra", 2, "queue clear: unexpected argument 'extra'"},
      // queue: work-queue commands
      {"{db} queue push --delay 5 v", 2, "--delay: Missing mandatory unit"},
      {"{db} queue push --delay -1s v", 2, "--delay"},
      {"{db} queue push --delay 9223372036854775807ms v", 2, "--delay: must be at most 10 years"},
      {"{db} queue push --delay 1.5s v", 2, "--delay: '1.5s' is not a whole number with a unit"},
      {"{db} queue take --vt 0s", 2, "--vt"},
      {"{db} queue take --vt 0ms", 2, "--vt: must be longer than 0ms"},
      {"{db} queue pop --timeout 0ms", 2, "--timeout: must be longer than 0ms"},
      {"{db} queue pop --wait 0s", 2, "--wait: must be longer than 0ms"},
      {"{db} queue take --wait 0m", 2, "--wait: must be longer than 0ms"},
      {"{db} pq pop-min --timeout 0ms", 2, "--timeout: must be longer than 0ms"},
      {"simulate --seed -1", 2, "--seed: '-1' is not a whole number >= 0"},
      {"simulate --seed 18446744073709551616", 2, "--seed: '18446744073709551616' is out of the"},
      {"simulate --seed 0x10", 2, "--seed: '0x10' is not a whole number >= 0"},
      {"simulate --seeds 0x3", 2, "--seeds: '0x3' is not an integer"},
      {"simulate --seed 18446744073709551615 --seeds 2", 2, "runs past the last seed"},
      {"{db} queue take --vt 8000000000000ms", 2, "--vt: must be at most 10 years"},
      {"{db} queue pop --wait 153722867280912m", 2, "--wait: must be at most 10 years"},
      {"{db} queue take --vt 30", 2, "--vt: Missing mandatory unit"},
      {"{db} queue take extra", 2, "queue take: unexpected argument 'extra'"},
      {"{db} queue take --count 0", 2, "--count: must be >= 1, not 0"},
      {"{db} queue take -n x", 2, "--count"},
      {"{db} queue take --count 1000001", 2, "--count"},
      {"{db} queue take --wait 5", 2, "--wait: Missing mandatory unit"},
      {"{db} queue take --wait -1s", 2, "--wait"},
      {"{db} queue take --wait 1s --vt 0s", 2, "--vt"},
      {"{db} queue ack", 2, "queue ack: token is required"},
      {"{db} queue ack 'not a token'", 2, "invalid_lease_token (9008): lease token: not base64url"},
      {"{db} queue ack a b", 2, "queue ack: unexpected argument 'b'"},
      {"{db} queue ack 'bad!token'", 2, "invalid_lease_token (9008)"},
      {"{db} queue ack TFVDSw", 2, "invalid_lease_token (9008)"},
      {"{db} queue nack", 2, "queue nack: token is required"},
      {"{db} queue nack --delay -1s TFVDSw", 2, "--delay"},
      {"{db} queue extend TFVDSw --vt 0s", 2, "--vt"},
      {"{db} queue extend TFVDSw", 2, "invalid_lease_token (9008)"},
      {"{db} queue stats extra", 2, "queue stats: unexpected argument 'extra'"},
      {"{db} queue dead-letters --limit 0", 2, "--limit"},
      {"{db} queue redrive", 2, "queue redrive: n is required"},
      {"{db} queue redrive -1", 2, "queue redrive: n: must be >= 0, not -1"},
      {"{db} queue redrive x", 2, "redrive"},
      {"{db} --max-attempts -1 queue take", 2, "--max-attempts: must be >= 0, not -1"},
      {"{db} queue nack --max-attempts x TFVDSw", 2, "--max-attempts"},
      {"{db} pq --max-attempts 1.5 take-min", 2, "--max-attempts"},
      {"{db} fair take --max-attempts 99999999999", 2, "--max-attempts"},
      // pq
      {"{db} pq take-min extra", 2, "pq take-min: unexpected argument 'extra'"},
      {"{db} pq take-max --vt -1s", 2, "--vt"},
      {"{db} pq take-min --count 0", 2, "--count: must be >= 1, not 0"},
      {"{db} pq take-max -n -3", 2, "--count"},
      {"{db} pq take-min --wait 3", 2, "--wait: Missing mandatory unit"},
      {"{db} pq take-max --wait 5parsecs", 2, "--wait"},
      {"{db} pq ack 'bad!token'", 2, "invalid_lease_token (9008)"},
      {"{db} pq push -p 1 --delay 5 v", 2, "--delay: Missing mandatory unit"},
      {"{db} pq push v", 2, "pq push: --priority is required"},
      {"{db} pq push -p 1", 2, "pq push: value is required"},
      {"{db} pq push -p abc v", 2, "--priority: 'abc' is not an integer"},
      {"{db} pq push -p 1.5 v", 2, "--priority: '1.5' is not an integer"},
      {"{db} pq push -p 9223372036854775808 v", 2, "out of the int64 range"},
      {"{db} pq push --priority=-9223372036854775809 v", 2, "out of the int64 range"},
      {"{db} pq push -p 1 a b", 2, "pq push: unexpected argument 'b'"},
      {"{db} pq push -p 1 {big}", 1, "value_too_large (2103): pq push: the value is larger"},
      {"{db} pq push -p 1 -", 1, "value_too_large (2103): pq push: the value (read from stdin)",
       "big"},
      {"{db} pq pop-min extra", 2, "pq pop-min: unexpected argument 'extra'"},
      {"{db} pq pop-max --timeout 1", 2, "--timeout: Missing mandatory unit"},
      {"{db} pq pop-min --wait 3", 2, "--wait: Missing mandatory unit"},
      {"{db} pq pop-max --count -2", 2, "--count"},
      {"{db} pq peek-min extra", 2, "pq peek-min: unexpected argument 'extra'"},
      {"{db} pq peek-max extra", 2, "pq peek-max: unexpected argument 'extra'"},
      {"{db} pq size extra", 2, "pq size: unexpected argument 'extra'"},
      {"{db} pq clear extra", 2, "pq clear: unexpected argument 'extra'"},
      // fair
      {"{db} fair push v", 2, "fair push: --tenant is required"},
      {"{db} fair push --tenant '' v", 2, "--tenant: must not be empty"},
      {"{db} fair push --tenant t", 2, "fair push: value is required"},
      {"{db} fair push --tenant t {big}", 1, "value_too_large (2103)"},
      {"{db} fair push --tenant {big} v", 1, "invalid_argument (9005): fair queue: tenant of"},
      {"{db} fair pop extra", 2, "fair pop: unexpected argument 'extra'"},
      {"{db} fair take --vt 0s", 2, "--vt"},
      {"{db} fair take --max-leased -1", 2, "--max-leased: must be >= 0, not -1"},
      {"{db} queue take -n 2 --raw", 2, "--raw excludes --count"},
      {"{db} fair take --max-leased -1", 2, "--max-leased"},
      {"{db} fair ack TFVDSw", 2, "fair ack: --tenant is required"},
      {"{db} fair ack --tenant t 'bad!token'", 2, "invalid_lease_token (9008)"},
      {"{db} fair nack --tenant t --delay -1s TFVDSw", 2, "--delay"},
      {"{db} fair stats extra", 2, "fair stats: unexpected argument 'extra'"},
      {"{db} fair extend TFVDSw", 2, "fair extend: --tenant is required"},
      {"{db} fair extend --tenant t", 2, "fair extend: token is required"},
      {"{db} fair extend --tenant t TFVDSw --vt 0s", 2, "--vt"},
      {"{db} fair extend --tenant t TFVDSw --vt 5", 2, "--vt: Missing mandatory unit"},
      {"{db} fair extend --tenant t 'bad!token'", 2, "invalid_lease_token (9008)"},
      {"{db} fair dead-letters", 2, "fair dead-letters: --tenant is required"},
      {"{db} fair dead-letters --tenant t --limit 0", 2, "--limit: must be >= 1, not 0"},
      {"{db} fair dead-letters --tenant {big}", 1, "invalid_argument (9005): fair queue: tenant"},
      {"{db} fair redrive 3", 2, "fair redrive: --tenant is required"},
      {"{db} fair redrive --tenant t", 2, "fair redrive: n is required"},
      {"{db} fair redrive --tenant t -1", 2, "n: must be >= 0, not -1"},
      {"{db} fair redrive --tenant t x", 2, "n: 'x' is not an integer"},
      {"{db} fair set-weight 2", 2, "fair set-weight: --tenant is required"},
      {"{db} fair set-weight --tenant t", 2, "fair set-weight: weight is required"},
      {"{db} fair set-weight --tenant t 0", 2, "weight: must be >= 1, not 0"},
      {"{db} fair set-weight --tenant t -2", 2, "weight: must be >= 1, not -2"},
      {"{db} fair set-weight --tenant t x", 2, "weight: 'x' is not an integer"},
      {"{db} fair set-weight --tenant t 1.5", 2, "weight: '1.5' is not an integer"},
      {"{db} fair set-weight --tenant t 9223372036854775808", 2, "out of the int64 range"},
      {"{db} fair set-weight --tenant t 2 3", 2, "fair set-weight: unexpected argument '3'"},
      {"{db} fair set-weight --tenant '' 2", 2, "--tenant: must not be empty"},
      {"{db} fair set-weight --tenant {big} 2", 1, "invalid_argument (9005): fair queue: tenant"},
      // --tenant takes the escaped form fair take prints: \\ and \xNN, nothing else after '\'.
      {"{db} fair push --tenant 'a\\q' v", 2, "--tenant: malformed escape at byte 2"},
      {"{db} fair push --tenant 'a\\' v", 2, "--tenant: malformed escape at byte 2"},
      {"{db} fair push --tenant 'a\\x4' v", 2, "--tenant: malformed escape at byte 2"},
      {"{db} fair push --tenant '\\xg0' v", 2, "--tenant: malformed escape at byte 1"},
      {"{db} fair ack --tenant 'a\\n' TFVDSw", 2, "--tenant: malformed escape"},
      // dump, demo, bench
      {"{db} dump extra", 2, "dump: unexpected argument 'extra'"},
      {"demo --clients 0", 2, "--clients: must be >= 2, not 0"},
      {"demo --clients 0x10", 2, "--clients: '0x10' is not an integer"},
      {"demo --clients x", 2, "--clients"},
      {"demo --items 0", 2, "--items"},
      {"demo extra", 2, "demo: unexpected argument 'extra'"},
      {"demo --db ''", 2, "--db: must not be empty"},
      {"bench --clients 1,zero", 2, "--clients: 'zero' is not a decimal integer"},
      {"bench --clients 1,,2", 2, "--clients: '1,,2' has an empty item"},
      {"bench --seconds 0x10", 2, "--seconds: '0x10' is not a decimal number"},
      {"bench --plot /nonexistent-dir/x.png --clients 1", 2,
       "--plot /nonexistent-dir/x.png: no directory /nonexistent-dir"},
      {"bench --clients 0", 2, "--clients"},
      {"bench --kinds queue,stack", 2, "--kinds: stack not in {queue,pq}"},
      {"bench --modes fast", 2, "--modes: fast not in {plain,hc}"},
      {"bench --ops peek", 2, "--ops: peek not in {push,pop,take,cycle,flow}"},
      {"bench --seconds 0", 2, "--seconds"},
      {"bench --seconds soon", 2, "--seconds"},
      {"bench --prefill 0", 2, "--prefill"},
      {"bench --batch-size 0", 2, "--batch-size"},
      {"bench --processes 0", 2, "--processes"},
      {"bench --processes 2", 2, "bench: --processes 2 needs a database several processes share"},
      {"{db} bench --processes 4 --clients 8", 2, "memory: and rocksdb: belong to one process"},
      {"bench --favor-latency --clients 1 --seconds 0.1", 2, "--favor-latency requires --combine"},
      {"bench extra", 2, "bench: unexpected argument 'extra'"},
  };
  return cases;
}

std::string expand(std::string args, const TestDb& db) {
  const std::string big = "\"$(head -c 100001 /dev/zero | tr '\\0' x)\"";
  for (auto [from, to] : {std::pair<std::string, std::string>{"{db}", db.flag()}, {"{big}", big}}) {
    if (auto at = args.find(from); at != std::string::npos) args.replace(at, from.size(), to);
  }
  return args;
}

TEST_F(CliTest, EveryBadCommandLineIsOneLineWithItsExitCodeAndWritesNothing) {
  TestDb db;
  ASSERT_EQ(run(db.flag() + " queue push first").status, 0);
  ASSERT_EQ(run(db.flag() + " pq push -p 7 seven").status, 0);
  const std::string before = run(db.flag() + " dump").out;
  const std::string big = write_temp("big", std::string(100001, 'x'));
  const std::string small = write_temp("small", "small");
  for (const BadCase& c : bad_cases()) {
    const std::string in = c.stdin_kind == "big"         ? big
                           : c.stdin_kind == "small"     ? small
                           : c.stdin_kind == "directory" ? "/"
                                                         : "/dev/null";
    CliRun r = run(expand(c.args, db), in);
    SCOPED_TRACE("kvq " + c.args + "\nstderr: " + r.err);
    EXPECT_EQ(r.status, c.status);
    EXPECT_EQ(lines(r.err), 1);
    EXPECT_EQ(r.err.rfind("kvq: error: ", 0), 0u);
    EXPECT_NE(r.err.find(c.err_has), std::string::npos) << "expected: " << c.err_has;
    EXPECT_EQ(r.out, "");
    // Only commands that got past parsing open the database: dump after those, and once at the end.
    if (TestDb::kDurable && r.status != 2) {
      EXPECT_EQ(run(db.flag() + " dump").out, before);
    }
  }
  if (TestDb::kDurable) {
    EXPECT_EQ(run(db.flag() + " dump").out, before) << "a bad command line wrote something";
  }
  kvq::testing::record_figure("bad inputs: CLI command lines", std::ssize(bad_cases()));
  std::filesystem::remove(big);
  std::filesystem::remove(small);
}

// take prints a shell-safe token, then the value; ack and nack take the token back; a second ack
// is lease_lost; stats, dead-letters and redrive print what the library says.
TEST_F(CliTest, WorkQueueCommandsPassLeaseTokensThroughTheShell) {
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that persists across commands";
  TestDb db;
  const std::string q = db.flag() + " queue --name jobs ";
  ASSERT_EQ(run(q + "push a b").status, 0);
  ASSERT_EQ(run(q + "push --delay 1m later").status, 0);
  CliRun take = run(q + "take --vt 30s");
  ASSERT_EQ(take.status, 0) << take.err;
  const std::string token = first_line(take.out);
  EXPECT_EQ(take.out.substr(token.size() + 1), "a\n");
  EXPECT_EQ(
      token.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
      std::string::npos);
  const std::string stats = run(q + "stats").out;
  EXPECT_EQ(stats.substr(0, stats.find("oldest")),
            "ready 1\ndelayed 1\nleased 1\ndead_letters 0\n");
  EXPECT_EQ(nlohmann::json::parse(run(q + "stats --json").out)["delayed"], 1);
  EXPECT_EQ(run(q + "extend " + token + " --vt 1m").status, 0);
  EXPECT_EQ(run(q + "ack " + token).status, 0);
  CliRun again = run(q + "ack " + token);
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.err.find("lease_lost (9007)"), std::string::npos) << again.err;
  CliRun json = run(q + "take --vt 30s --json");
  ASSERT_EQ(json.status, 0) << json.err;
  auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["value"], "b");
  EXPECT_EQ(j["attempt"], 1);
  EXPECT_EQ(run(q + "nack " + j["token"].get<std::string>() + " --reason 'no luck'").status, 0);
  EXPECT_EQ(run(q + "take --vt 30s --raw").status, 0);
  EXPECT_EQ(run(q + "take --vt 30s").status, 3) << "the delayed item is not due for a minute";
  EXPECT_EQ(run(q + "redrive 5").out, "0\n");
  EXPECT_EQ(run(q + "dead-letters").out, "");
  CliRun pq = run(db.flag() + " pq push -p 3 x");
  ASSERT_EQ(pq.status, 0);
  CliRun pt = run(db.flag() + " pq take-max --vt 1s");
  ASSERT_EQ(pt.status, 0) << pt.err;
  EXPECT_EQ(run(db.flag() + " pq ack " + first_line(pt.out)).status, 0);
}

// take --count N leases up to N items in one transaction (token and value of each, in order);
// take --wait blocks for the first (exit 3 if none came); --json prints one object per lease.
TEST_F(CliTest, TakeCountAndWaitLeaseBatchesAndBlock) {
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that persists across commands";
  TestDb db;
  const std::string q = db.flag() + " queue --name batch ";
  ASSERT_EQ(run(q + "push a b c d").status, 0);
  CliRun two = run(q + "take --count 2 --vt 30s");
  ASSERT_EQ(two.status, 0) << two.err;
  std::vector<std::string> lines;
  for (std::size_t at = 0, nl; (nl = two.out.find('\n', at)) != std::string::npos; at = nl + 1) {
    lines.push_back(two.out.substr(at, nl - at));
  }
  ASSERT_EQ(lines.size(), 4u) << two.out;
  EXPECT_EQ(lines[1], "a");
  EXPECT_EQ(lines[3], "b");
  EXPECT_EQ(run(q + "ack " + lines[0]).status, 0);
  EXPECT_EQ(run(q + "ack " + lines[2]).status, 0);
  CliRun json = run(q + "take -n 5 --wait 1s --json");
  ASSERT_EQ(json.status, 0) << json.err;
  const std::string second = json.out.substr(json.out.find('\n') + 1);
  EXPECT_EQ(nlohmann::json::parse(first_line(json.out))["value"], "c");
  EXPECT_EQ(nlohmann::json::parse(second)["value"], "d");
  const auto t0 = std::chrono::steady_clock::now();
  CliRun none = run(q + "take --wait 300ms");
  EXPECT_EQ(none.status, 3) << none.err;
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(290));
  ASSERT_EQ(run(db.flag() + " pq push -p 1 low").status, 0);
  ASSERT_EQ(run(db.flag() + " pq push -p 9 high").status, 0);
  CliRun pt = run(db.flag() + " pq take-max --count 5 --wait 1s");
  ASSERT_EQ(pt.status, 0) << pt.err;
  EXPECT_NE(pt.out.find("\nhigh\n"), std::string::npos) << pt.out;
  EXPECT_LT(pt.out.find("\nhigh\n"), pt.out.find("\nlow\n")) << pt.out;
}

// fair push / pop / take / ack / stats: tenants served in turn, the tenant printed before the
// value, the lease token passed back with its tenant, per-tenant counts.
TEST_F(CliTest, FairCommandsServeTenantsInTurnAndPassLeasesBack) {
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that persists across commands";
  TestDb db;
  const std::string f = db.flag() + " fair --name jobs ";
  ASSERT_EQ(run(f + "push --tenant a a1 a2").status, 0);
  ASSERT_EQ(run(f + "push --tenant b b1").status, 0);
  EXPECT_EQ(run(f + "pop").out, "a\na1\n");
  CliRun take = run(f + "take --vt 30s");
  ASSERT_EQ(take.status, 0) << take.err;
  const std::string token = first_line(take.out);
  EXPECT_EQ(take.out.substr(token.size() + 1), "b\nb1\n");
  auto stats = nlohmann::json::parse(run(f + "stats --json").out);
  ASSERT_EQ(stats.size(), 2U);
  EXPECT_EQ(stats[0]["ready"], 1);
  EXPECT_EQ(stats[1]["leased"], 1);
  EXPECT_EQ(run(f + "stats").out,
            "tenant\tready\tdelayed\tleased\tdead_letters\tweight\na\t1\t0\t0\t0\t1\n"
            "b\t0\t0\t1\t0\t1\n");
  // Another tenant's token is a bad argument (invalid_lease_token), as a malformed one is.
  EXPECT_EQ(run(f + "extend --tenant a " + token + " --vt 1m").status, 2) << "b's token";
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  CliRun extend = run(f + "extend --tenant b " + token + " --vt 1m");
  ASSERT_EQ(extend.status, 0) << extend.err;
  EXPECT_NEAR(std::stoll(extend.out), now_ms + 60'000, 10'000) << extend.out;
  EXPECT_EQ(run(f + "ack --tenant a " + token).status, 2) << "a token of b's items";
  EXPECT_EQ(run(f + "ack --tenant b " + token).status, 0);
  EXPECT_EQ(run(f + "ack --tenant b " + token).status, 1);
  EXPECT_EQ(run(f + "extend --tenant b " + token).status, 1) << "acked: lease_lost";
  EXPECT_EQ(run(f + "pop").out, "a\na2\n");
  EXPECT_EQ(run(f + "pop").status, 3);
}

// fair set-weight: the tenant's turns per round, shown by stats; dead-letters and redrive of one
// tenant print what the library says (here none to list or move: without --max-attempts nothing
// goes to the dead letters).
TEST_F(CliTest, FairSetWeightDeadLettersAndRedriveActOnOneTenant) {
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that persists across commands";
  TestDb db;
  const std::string f = db.flag() + " fair --name weights ";
  ASSERT_EQ(run(f + "push --tenant a a1 a2 a3 a4").status, 0);
  ASSERT_EQ(run(f + "push --tenant b b1 b2").status, 0);
  CliRun set = run(f + "set-weight --tenant a 3");
  ASSERT_EQ(set.status, 0) << set.err;
  EXPECT_EQ(set.out, "");
  auto stats = nlohmann::json::parse(run(f + "stats --json").out);
  ASSERT_EQ(stats.size(), 2U);
  EXPECT_EQ(stats[0]["weight"], 3);
  EXPECT_EQ(stats[1]["weight"], 1);
  std::string order;
  for (int i = 0; i < 6; ++i) order += run(f + "pop").out.substr(0, 1);
  EXPECT_EQ(order, "aaabab") << "a has 3 turns per round, b 1";
  EXPECT_EQ(run(f + "dead-letters --tenant a").out, "");
  EXPECT_EQ(run(f + "dead-letters --tenant a --json").out, "[]\n");
  EXPECT_EQ(run(f + "redrive --tenant a 5").out, "0\n");
  EXPECT_EQ(run(f + "set-weight --tenant a 1").status, 0);
  EXPECT_EQ(nlohmann::json::parse(run(f + "stats --json").out)[0]["weight"], 1);
}

// --max-attempts N: a lease nacked (with its --reason) or run out at the N-th delivery sends its
// item to the dead letters, on queue, pq and fair; redrive brings it back. Without the option
// the same nack gives the item back.
TEST_F(CliTest, MaxAttemptsSendsNackedAndExpiredItemsToTheDeadLetters) {
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that persists across commands";
  TestDb db;
  const std::string q = db.flag() + " queue --name jobs ";
  ASSERT_EQ(run(q + "push j1").status, 0);
  CliRun take = run(q + "take");
  ASSERT_EQ(take.status, 0) << take.err;
  ASSERT_EQ(
      run(q + "--max-attempts 2 nack " + first_line(take.out) + " --reason 'try again'").status, 0);
  EXPECT_EQ(run(q + "dead-letters").out, "") << "first delivery of 2";
  take = run(q + "take");
  ASSERT_EQ(take.status, 0) << take.err;
  EXPECT_EQ(take.out.substr(take.out.find('\n') + 1), "j1\n");
  CliRun nack = run(db.flag() + " --max-attempts 2 queue --name jobs nack " + first_line(take.out) +
                    " --reason 'bad input'");
  ASSERT_EQ(nack.status, 0) << nack.err;
  EXPECT_EQ(run(q + "dead-letters").out, "2\t0\tbad input\tj1\n");
  EXPECT_EQ(run(q + "pop").status, 3);
  EXPECT_EQ(run(q + "redrive 5").out, "1\n");
  EXPECT_EQ(run(q + "pop").out, "j1\n");

  const std::string p = db.flag() + " pq --name jobs ";
  ASSERT_EQ(run(p + "push -p 7 p1").status, 0);
  take = run(p + "take-min");
  ASSERT_EQ(take.status, 0) << take.err;
  ASSERT_EQ(run(p + "nack --max-attempts 1 " + first_line(take.out) + " --reason broken").status,
            0);
  EXPECT_EQ(run(p + "dead-letters").out, "1\t7\tbroken\tp1\n");

  const std::string f = db.flag() + " fair --name jobs ";
  ASSERT_EQ(run(f + "push --tenant t f1").status, 0);
  ASSERT_EQ(run(f + "take --vt 10ms").status, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(run(f + "--max-attempts 1 pop").status, 3) << "the expired lease's item is dead";
  EXPECT_EQ(run(f + "dead-letters --tenant t").out, "1\t0\tvisibility timeout expired\tf1\n");
}

// fair pop and take that find nothing they may serve while items are ready (their tenants are at
// a lease limit a take found) say so, rather than that the queue is empty; exit 3 either way.
TEST_F(CliTest, FairTakeAtALeaseLimitSaysItemsWait) {
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that persists across commands";
  TestDb db;
  const std::string f = db.flag() + " fair --name limits ";
  ASSERT_EQ(run(f + "push --tenant a a1 a2 a3").status, 0);
  CliRun first = run(f + "take --max-leased 1");
  ASSERT_EQ(first.status, 0) << first.err;
  for (const char* command : {"take --max-leased 1", "pop"}) {
    CliRun none = run(f + command);
    EXPECT_EQ(none.status, 3) << command;
    EXPECT_EQ(none.out, "") << command;
    EXPECT_NE(none.err.find("though 2 items are ready: of tenants at their lease limit"),
              std::string::npos)
        << command << ": " << none.err;
  }
  const std::string token = first_line(first.out);
  ASSERT_EQ(run(f + "ack --tenant a " + token).status, 0);
  EXPECT_EQ(run(f + "pop").out, "a\na2\n");
  EXPECT_EQ(run(f + "pop").out, "a\na3\n");
  CliRun empty = run(f + "take --max-leased 1");
  EXPECT_EQ(empty.status, 3);
  EXPECT_EQ(empty.err, "kvq: fair queue is empty\n");
}

// --json never replaces bytes: a value or tenant that is valid UTF-8 is a JSON string ("value",
// "tenant"), any other comes as the standard base64 of its bytes ("value_base64",
// "tenant_base64") instead. (It once printed U+FFFD for each bad byte: the bytes were lost.)
TEST_F(CliTest, JsonGivesBackBytesThatAreNotUtf8AsBase64) {
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that persists across commands";
  TestDb db;
  const std::string q = db.flag() + " queue --name bytes ";
  const std::string bad = write_temp("bad", std::string("\0\xfe\xff\x80x", 5));
  ASSERT_EQ(run(q + "push -", bad).status, 0);
  ASSERT_EQ(run(q + "push 'caf\xc3\xa9 \t \\ \"'").status, 0);
  CliRun first = run(q + "take --json");
  ASSERT_EQ(first.status, 0) << first.err;
  auto j = nlohmann::json::parse(first.out);
  EXPECT_FALSE(j.contains("value")) << first.out;
  EXPECT_EQ(j["value_base64"], "AP7/gHg=") << first.out;
  CliRun second = run(q + "take --json");
  ASSERT_EQ(second.status, 0) << second.err;
  j = nlohmann::json::parse(second.out);
  EXPECT_EQ(j["value"], "caf\xc3\xa9 \t \\ \"") << second.out;
  EXPECT_FALSE(j.contains("value_base64")) << second.out;
  const std::string f = db.flag() + " fair --name bytes ";
  ASSERT_EQ(run(f + "push --tenant \"$(printf 'x\\377')\" v").status, 0);
  ASSERT_EQ(run(f + "push --tenant ok v").status, 0);
  CliRun stats = run(f + "stats --json");
  ASSERT_EQ(stats.status, 0) << stats.err;
  auto tenants = nlohmann::json::parse(stats.out);
  ASSERT_EQ(tenants.size(), 2U) << stats.out;
  EXPECT_EQ(tenants[0]["tenant"], "ok") << stats.out;
  EXPECT_EQ(tenants[1]["tenant_base64"], "eP8=") << stats.out;
  EXPECT_FALSE(tenants[1].contains("tenant")) << stats.out;
  std::filesystem::remove(bad);
}

// pop -n and fair pop / take print a value as its bytes and a newline, so a value holding a newline
// reads as two; --json prints each as one line of JSON (no --json there until session 30).
TEST_F(CliTest, PopAndFairJsonKeepAValueWithANewlineWhole) {
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that persists across commands";
  TestDb db;
  ASSERT_EQ(run(db.flag() + " queue push \"$(printf 'a\\nb')\" c \"$(printf 'x\\377')\"").status,
            0);
  CliRun popped = run(db.flag() + " queue pop -n 3 --json");
  ASSERT_EQ(popped.status, 0) << popped.err;
  EXPECT_EQ(popped.out, "{\"value\":\"a\\nb\"}\n{\"value\":\"c\"}\n{\"value_base64\":\"eP8=\"}\n");
  ASSERT_EQ(run(db.flag() + " pq push -p 1 \"$(printf 'p\\nq')\"").status, 0);
  EXPECT_EQ(run(db.flag() + " pq pop-min --json").out, "{\"value\":\"p\\nq\"}\n");
  const std::string f = db.flag() + " fair ";
  ASSERT_EQ(run(f + "push --tenant \"$(printf 't\\nu')\" \"$(printf 'v\\nw')\" z").status, 0);
  CliRun fair_pop = run(f + "pop --json");
  ASSERT_EQ(fair_pop.status, 0) << fair_pop.err;
  EXPECT_EQ(fair_pop.out, "{\"tenant\":\"t\\nu\",\"value\":\"v\\nw\"}\n");
  CliRun taken = run(f + "take --json");
  ASSERT_EQ(taken.status, 0) << taken.err;
  const auto j = nlohmann::json::parse(taken.out);
  EXPECT_EQ(j["tenant"], "t\nu") << taken.out;
  EXPECT_EQ(j["value"], "z") << taken.out;
  EXPECT_EQ(j["attempt"], 1) << taken.out;
  ASSERT_TRUE(j.contains("token")) << taken.out;
  EXPECT_EQ(run(f + "ack --tenant 't\\x0au' " + j["token"].get<std::string>()).status, 0);
  EXPECT_EQ(run(db.flag() + " queue pop --json").status, 3);
  EXPECT_EQ(run(db.flag() + " queue pop --json --raw").status, 2);
}

// A tenant comes back in the form fair pop / take / stats print it (escape(): \xNN for a byte
// outside printable ASCII, \\ for a backslash): --tenant takes that form, so a lease taken from
// tenant "a<TAB>b" is acked with --tenant 'a\x09b', and one of tenant "c\d" with 'c\\d'.
TEST_F(CliTest, FairTenantArgumentTakesTheEscapedFormTakePrints) {
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that persists across commands";
  TestDb db;
  const std::string f = db.flag() + " fair --name escaped ";
  ASSERT_EQ(run(f + "push --tenant \"$(printf 'a\\tb')\" v1").status, 0);
  ASSERT_EQ(run(f + "push --tenant 'c\\\\d' v2").status, 0);
  CliRun take = run(f + "take --vt 30s");
  ASSERT_EQ(take.status, 0) << take.err;
  const std::string token = first_line(take.out);
  EXPECT_EQ(take.out.substr(token.size() + 1), "a\\x09b\nv1\n");
  CliRun ack = run(f + "ack --tenant 'a\\x09b' " + token);
  EXPECT_EQ(ack.status, 0) << ack.err;
  take = run(f + "take --vt 30s");
  ASSERT_EQ(take.status, 0) << take.err;
  const std::string token2 = first_line(take.out);
  EXPECT_EQ(take.out.substr(token2.size() + 1), "c\\\\d\nv2\n");
  const auto stats = nlohmann::json::parse(run(f + "stats --json").out);
  ASSERT_EQ(stats.size(), 2U);
  EXPECT_EQ(stats[0]["tenant"], "a\tb");
  EXPECT_EQ(stats[1]["tenant"], "c\\d");
  EXPECT_EQ(run(f + "stats").out.substr(48), "a\\x09b\t0\t0\t0\t0\t1\nc\\\\d\t0\t0\t1\t0\t1\n");
  ack = run(f + "ack --tenant 'c\\\\d' " + token2);
  EXPECT_EQ(ack.status, 0) << ack.err;
  // Upper-case hex and plain text name the same tenants; the queue is empty after both acks.
  EXPECT_EQ(run(f + "push --tenant 'A\\x5A' v3").status, 0);
  EXPECT_EQ(run(f + "pop").out, "AZ\nv3\n");
  EXPECT_EQ(run(f + "pop").status, 3);
}

// With every commit failing (fault injection at rate 1) over a queue holding items, a command
// given --wait still ends soon after it: timed_out, exit 1, naming the last error (not exit 3: no
// transaction saw the queue empty). It once retried until killed (take --wait) or said "empty"
// (pop --wait). So does a batch given --timeout (refused with --count until session 30: a pop
// batch had no bound). Over an empty queue the same commands end in exit 3: a pop or take that
// finds nothing commits nothing, so no fault touches it.
TEST_F(CliTest, WaitBoundsACommandWhoseCommitsAlwaysFail) {
  TestDb items;
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that outlives a command (rocksdb)";
  ASSERT_EQ(run(items.flag() + " queue push q1").status, 0);
  ASSERT_EQ(run(items.flag() + " pq push --priority 1 p1").status, 0);
  const std::string failing = "--db '" + items.url() + "?conflict_rate=1' ";
  for (const char* command :
       {"queue take --wait 300ms", "queue pop --wait 300ms", "pq take-min --wait 300ms",
        "pq pop-max --wait 300ms -n 2", "queue pop --timeout 300ms -n 2"}) {
    const auto t0 = std::chrono::steady_clock::now();
    CliRun r = run(failing + command, "/dev/null", "", 20);
    const auto took = std::chrono::steady_clock::now() - t0;
    SCOPED_TRACE(std::string(command) + "\nstderr: " + r.err);
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(lines(r.err), 1);
    EXPECT_NE(r.err.find("timed_out (1004)"), std::string::npos);
    EXPECT_NE(r.err.find("300 ms"), std::string::npos);  // the timeout it names
    EXPECT_NE(r.err.find("not_committed (1020)"), std::string::npos);
    EXPECT_GE(took, std::chrono::milliseconds(300));
    EXPECT_LT(took, std::chrono::seconds(5)) << "--wait 300ms and 1 s for an attempt under way";
  }
  // Nothing was taken: both items are still there.
  EXPECT_EQ(run(items.flag() + " queue pop").out, "q1\n");
  EXPECT_EQ(run(items.flag() + " pq pop-min").out, "p1\n");
  for (const char* command : {"queue take --wait 300ms", "pq pop-min --wait 300ms"}) {
    CliRun empty =
        run("--db 'memory:?conflict_rate=1' " + std::string(command), "/dev/null", "", 20);
    EXPECT_EQ(empty.status, 3) << command << ": " << empty.err;
  }
}

TEST_F(CliTest, KvqErrorsNameTheErrorOnce) {
  CliRun r = run("--db nonsense://x queue size");
  EXPECT_EQ(r.status, 2);
  const std::string name = "connection_string_invalid";
  const auto first = r.err.find(name);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(name, first + 1), std::string::npos) << r.err;
}

TEST_F(CliTest, HelpListsSubcommandsAndExitCodes) {
  CliRun r = run("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* s : {"queue", "pq", "dump", "demo", "bench", "--db", "2 bad arguments",
                        "3 pop/peek on an empty"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  }
  for (const char* sub : {"queue push", "pq push", "pq pop-min", "dump", "demo", "bench"}) {
    CliRun h = run(std::string(sub) + " --help");
    EXPECT_EQ(h.status, 0) << sub;
    EXPECT_NE(h.out.find("Usage"), std::string::npos) << sub << ": " << h.out;
  }
}

TEST_F(CliTest, HelpSaysWhereTheDefaultDatabaseLives) {
  CliRun r = run("--help");
#ifdef KVQ_WITH_ROCKSDB
  EXPECT_NE(r.out.find("rocksdb:./kvq-data"), std::string::npos) << r.out;
#else
  EXPECT_NE(r.out.find("memory:"), std::string::npos) << r.out;
#endif
}

TEST_F(CliTest, GlobalOptionsWorkBeforeAndAfterTheSubcommand) {
  TestDb db;
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that outlives a command";
  const std::string url = db.url();
  EXPECT_EQ(run("--db " + url + " queue push a").status, 0);
  EXPECT_EQ(run("queue --db " + url + " push b").status, 0);
  EXPECT_EQ(run("queue push c --db " + url).status, 0);
  EXPECT_EQ(run("queue size --db " + url).out, "3\n");
  EXPECT_EQ(run("queue pop --db " + url).out, "a\n");
  EXPECT_EQ(run("queue --name other pop --db " + url).status, 3);
  EXPECT_EQ(run("queue pop --name default --high-contention --db " + url).out, "b\n");
  EXPECT_EQ(run("pq push -p 3 x --db " + url).status, 0);
  EXPECT_EQ(run("pq pop-max --db " + url).out, "x\n");
  CliRun demo = run("demo --db memory: --clients 2 --items 50 --quiet");
  EXPECT_EQ(demo.status, 0) << demo.err;
  EXPECT_NE(demo.out.find("memory:"), std::string::npos) << demo.out;
}

TEST_F(CliTest, PopCountAndWaitPrintValuesInQueueOrder) {
  TestDb db;
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that outlives a command";
  ASSERT_EQ(run(db.flag() + " queue push a b c d e").status, 0);
  EXPECT_EQ(run(db.flag() + " queue pop --count 3").out, "a\nb\nc\n");
  EXPECT_EQ(run(db.flag() + " queue pop --wait 5s -n 9").out, "d\ne\n");
  CliRun empty = run(db.flag() + " queue pop --wait 200ms");
  EXPECT_EQ(empty.status, 3);
  EXPECT_EQ(run(db.flag() + " queue pop -n 4").status, 3);
  ASSERT_EQ(run(db.flag() + " pq push -p 5 five").status, 0);
  ASSERT_EQ(run(db.flag() + " pq push -p 1 one").status, 0);
  ASSERT_EQ(run(db.flag() + " pq push -p 9 nine").status, 0);
  EXPECT_EQ(run(db.flag() + " pq pop-max --count 2").out, "nine\nfive\n");
  EXPECT_EQ(run(db.flag() + " pq pop-min --wait 1s").out, "one\n");
}

TEST_F(CliTest, ABinaryValueNearTheLimitRoundTripsThroughStdin) {
  TestDb db;
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that outlives a command";
  const std::string value = random_bytes(99999, 42);
  const std::string in = write_temp("value", value);
  ASSERT_EQ(run(db.flag() + " queue push -", in).status, 0);
  ASSERT_EQ(run(db.flag() + " queue push -", in).status, 0);
  CliRun raw = run(db.flag() + " queue pop --raw");
  EXPECT_EQ(raw.status, 0) << raw.err;
  EXPECT_TRUE(raw.out == value) << "popped " << raw.out.size() << " bytes";
  CliRun line = run(db.flag() + " queue pop");
  EXPECT_TRUE(line.out == value + "\n") << "popped " << line.out.size() << " bytes";
  ASSERT_EQ(run(db.flag() + " pq push -p -3 -", in).status, 0);
  CliRun pq = run(db.flag() + " pq pop-min -r");
  EXPECT_TRUE(pq.out == value) << "popped " << pq.out.size() << " bytes";
  const std::string exact = write_temp("exact", std::string(100000, 'y'));
  EXPECT_EQ(run(db.flag() + " queue push -", exact).status, 0);
  EXPECT_EQ(run(db.flag() + " queue pop").out.size(), 100001u);
  std::filesystem::remove(in);
  std::filesystem::remove(exact);
}

TEST_F(CliTest, PushOfSeveralValuesKeepsTheirOrderAndStdinMixesWithArguments) {
  TestDb db;
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that outlives a command";
  const std::string in = write_temp("mid", "from stdin");
  ASSERT_EQ(run(db.flag() + " queue push -- a - c -d", in).status, 0);
  for (const char* v : {"a\n", "from stdin\n", "c\n", "-d\n"}) {
    EXPECT_EQ(run(db.flag() + " queue pop").out, v);
  }
  std::filesystem::remove(in);
}

// Values are pushed as given: CLI11 split "[a,b]" into two values (dropping empty items: "[]"
// pushed nothing), and a `--` after the first value ended the list, so that what followed was
// read as options ("a -- --high-contention" pushed "a" in high-contention mode) or refused.
TEST_F(CliTest, ValuesThatLookLikeListsOrOptionsArePushedAsGiven) {
  TestDb db;
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that outlives a command";
  ASSERT_EQ(run(db.flag() + " queue push '[a,b]' '[1,,2]' -- --high-contention '[]' -x").status, 0);
  EXPECT_EQ(run(db.flag() + " queue pop -n 9").out, "[a,b]\n[1,,2]\n--high-contention\n[]\n-x\n");
  ASSERT_EQ(run(db.flag() + " fair push --tenant t '[x,y]' -- --tenant u").status, 0);
  EXPECT_EQ(run(db.flag() + " fair stats --json").out.find("\"u\""), std::string::npos);
  for (const char* v : {"t\n[x,y]\n", "t\n--tenant\n", "t\nu\n"}) {
    EXPECT_EQ(run(db.flag() + " fair pop").out, v);
  }
}

// Numbers are decimal, also with leading zeros: CLI11's own conversion read "010" as octal 8 (a
// priority, a count, a weight), after the validators had accepted it as 10 (found by a review).
TEST_F(CliTest, NumbersWithLeadingZerosAreDecimal) {
  TestDb db;
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that outlives a command";
  ASSERT_EQ(run(db.flag() + " pq push -p 010 ten").status, 0);
  const CliRun taken = run(db.flag() + " pq take-min --json");
  EXPECT_NE(taken.out.find("\"priority\":10,"), std::string::npos) << taken.out;
  ASSERT_EQ(run(db.flag() + " queue push a b c d e f g h i j k l").status, 0);
  EXPECT_EQ(lines(run(db.flag() + " queue pop -n 010").out), 10);
  // simulate and demo too (they read "010" as 8 until session 30).
  EXPECT_NE(run("simulate -n 010").out.find("10 seeds (1..10)"), std::string::npos);
  EXPECT_NE(run("demo -c 010 -n 010").out.find("10 clients"), std::string::npos);
}

// A closed stdin is refused as closed: gRPC's static initializers had opened an eventfd on
// descriptor 0 before main() could guard it, and '-' read it ("Resource temporarily
// unavailable"). The guard runs before every constructor now.
TEST_F(CliTest, AClosedStdinIsRefusedAsClosed) {
  const std::string err = temp_path("err");
  const std::string cmd =
      "KVQ_DB= '" + cli() + "' --db memory: queue push - 0<&- 2>'" + err + "' >/dev/null";
  const int rc = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 1);
  std::ifstream in(err);
  const std::string message((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(message.find("'-' reads the value from stdin, which is closed"), std::string::npos)
      << message;
  std::filesystem::remove(err);
}

// A value popped or taken is printed, and if stdout cannot take it (a full disk) the command
// says so and exits 1 instead of 0: the item is gone from the queue, and a script must know.
TEST_F(CliTest, AValueThatCannotBeWrittenToStdoutIsAnError) {
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that outlives a command";
  TestDb db;
  ASSERT_EQ(run(db.flag() + " queue push v").status, 0);
  CliRun r = run(db.flag() + " queue pop", "/dev/null", "/dev/full");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("kvq: error: cannot write to standard output"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not put back"), std::string::npos) << r.err;
}

// A waiting pop or take with --count prints its first item before it pops or takes the rest: if
// that print failed, it went on and popped (or leased) the rest, lost with it; and with --json
// nothing was written until the command ended (found by review in session 32). It now stops at
// the first failed print, JSON or not.
TEST_F(CliTest, AWaitingPopOrTakeWhoseFirstPrintFailsTakesNoMore) {
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that outlives a command";
  TestDb db;
  ASSERT_EQ(run(db.flag() + " queue push a b c d e f g h").status, 0);
  for (const char* json : {"", " --json"}) {
    CliRun r = run(db.flag() + " queue pop --wait 1s -n 3" + json, "/dev/null", "/dev/full");
    EXPECT_EQ(r.status, 1) << json;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("cannot write to standard output"), std::string::npos) << r.err;
  }
  EXPECT_EQ(run(db.flag() + " queue size").out, "6\n") << "one popped by each, no more";
  EXPECT_EQ(run(db.flag() + " queue take --wait 1s -n 3 --json", "/dev/null", "/dev/full").status,
            1);
  EXPECT_NE(run(db.flag() + " queue stats").out.find("leased 1\n"), std::string::npos);
}

// A structure's name is a tuple string, so UTF-8: other bytes are a bad argument (exit 2), as
// --tenant's are, not an error of the store (exit 1).
TEST_F(CliTest, ANameThatIsNotUtf8IsABadArgument) {
  for (const char* command : {" queue", " pq", " fair"}) {
    CliRun r = run(std::string("--db memory:") + command + " --name \"$(printf '\\377')\" size");
    EXPECT_EQ(r.status, 2) << command << ": " << r.err;
    EXPECT_NE(r.err.find("must be UTF-8"), std::string::npos) << r.err;
  }
}

// The same when stdout is a pipe whose reader has gone (`kvq queue pop | head -c 1` once head is
// done): the write fails with EPIPE instead of SIGPIPE killing kvq without a word (exit 141).
TEST_F(CliTest, AValueThatCannotBeWrittenToAClosedPipeIsAnError) {
  if (!TestDb::kDurable) GTEST_SKIP() << "needs a database that outlives a command";
  TestDb db;
  ASSERT_EQ(run(db.flag() + " queue push v").status, 0);
  const std::string status = temp_path("status"), err = temp_path("err");
  // `true` exits at once, so the pipe has no reader when kvq, started 0.3 s later, writes.
  const std::string cmd = "{ sleep 0.3; KVQ_DB= '" + cli() + "' " + db.flag() + " queue pop 2>'" +
                          err + "'; echo $? >'" + status + "'; } | true";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream status_file(status), err_file(err);
  std::string code, message;
  std::getline(status_file, code);
  std::getline(err_file, message);
  EXPECT_EQ(code, "1");
  EXPECT_NE(message.find("kvq: error: cannot write to standard output"), std::string::npos)
      << message;
  std::filesystem::remove(status);
  std::filesystem::remove(err);
}

TEST_F(CliTest, PopOnEmptyQueueExitsThree) {
  for (const char* cmd : {"queue pop", "queue peek", "pq pop-min", "pq pop-max", "pq peek-min",
                          "pq peek-max", "queue pop --timeout 500ms"}) {
    CliRun r = run(std::string("--db memory: ") + cmd);
    EXPECT_EQ(r.status, 3) << cmd;
    EXPECT_EQ(lines(r.err), 1) << cmd << ": " << r.err;
    EXPECT_EQ(r.out, "") << cmd;
  }
}

TEST_F(CliTest, SizeOfFreshQueueIsZero) {
  CliRun r = run("--db memory: queue size");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "0\n");
  EXPECT_EQ(run("--db memory: pq size").out, "0\n");
}

TEST_F(CliTest, DemoPassesItsHistoryCheck) {
  CliRun r = run("demo --clients 4 --items 400 --quiet");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("verdict: PASS"), std::string::npos) << r.out;
  CliRun p = run("demo --clients 4 --items 200 --quiet --plain");
  EXPECT_EQ(p.status, 0) << p.out << p.err;
}

TEST_F(CliTest, BenchShortRunPrintsJson) {
  CliRun r = run("bench --clients 1,2 --seconds 50ms --prefill 300 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  // push: queue,pq x 2 client counts (plain only); pop: 2 kinds x 2 modes x 2 client counts.
  EXPECT_EQ(j["results"].size(), 4u + 8u);
  EXPECT_DOUBLE_EQ(j["seconds"].template get<double>(), 0.05);
  for (const auto& row : j["results"]) {
    EXPECT_GT(row["ops"].template get<long>(), 0) << row.dump();
    EXPECT_GE(row["p99_us"].template get<double>(), row["p50_us"].template get<double>());
  }
}

// flow: one client in four pushes, the others wait for items (pop_wait); every row has ops.
TEST_F(CliTest, BenchFlowRunsProducersAndWaitingConsumers) {
  CliRun r = run("bench --ops flow --clients 4,8 --seconds 50ms --combine --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["results"].size(), 8u);  // 2 kinds x 2 modes x 2 client counts
  for (const auto& row : j["results"]) {
    EXPECT_EQ(row["op"], "flow") << row.dump();
    EXPECT_GT(row["ops"].template get<long>(), 0) << row.dump();
  }
}

TEST_F(CliTest, BenchPlotsOpsPerClientIntoAPng) {
  const std::string png = temp_path("plot") + ".png";
  CliRun r = run("bench --clients 1,2 --seconds 20ms --prefill 100 --kinds queue --plot " + png);
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream in(png, std::ios::binary);
  std::string magic(4, '\0');
  in.read(magic.data(), 4);
  EXPECT_EQ(magic, "\x89PNG");
  std::filesystem::remove(png);
  // A --plot that cannot be written is refused before measuring (EveryBadCommandLine...).
}

TEST_F(CliTest, DurableDatabasePersistsAcrossCommands) {
  TestDb db;
  if (!TestDb::kDurable) GTEST_SKIP() << "rocksdb engine not built";
  const std::string flag = db.flag() + " ";
  EXPECT_EQ(run(flag + "pq push --priority 5 five").status, 0);
  EXPECT_EQ(run(flag + "pq push --priority 1 one").status, 0);
  EXPECT_EQ(run(flag + "queue push a b").status, 0);
  EXPECT_EQ(run(flag + "pq size").out, "2\n");
  EXPECT_EQ(run(flag + "pq pop-min").out, "one\n");
  EXPECT_EQ(run(flag + "queue pop").out, "a\n");
  CliRun d = run(flag + "dump");
  EXPECT_EQ(d.status, 0);
  EXPECT_NE(d.out.find("(\"P\", \"default\", 5, 0, b\""), std::string::npos) << d.out;
}

TEST_F(CliTest, DumpOfAFreshDatabasePrintsNothing) {
  // memory: lives for one command, so dump of a fresh database prints nothing.
  CliRun r = run("--db memory: dump");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "");
}

}  // namespace
