// The CLI's command code, called in-process.
// Push (tools/kvq/commands.h: push_values, what `kvq queue push A B C` runs) on a database whose
// engine injects commit_unknown_result, applied and not applied: every value is pushed exactly
// once and comes out in the order given, also with several clients pushing at once. (The CLI once
// pushed all values in one transaction of its own retry loop without a marker, so a commit that
// applied but reported commit_unknown_result was pushed again; it now uses the layer's
// push_batch, one transaction with an idempotency marker.)
// Printing user bytes (tools/kvq/cli.h): escape / unescape are exact inverses over every byte and
// refuse malformed escapes as usage errors; --json puts bytes that are not UTF-8 as base64.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/testing/fault_injection.h"
#include "kvq/kvq.h"
#include "support/figures.h"
#include "support/layer_engines.h"
#include "tools/kvq/commands.h"

namespace kvq {
namespace {

class CliPushTest : public ::testing::TestWithParam<testing::LayerEngine> {
 protected:
  void SetUp() override {
    std::string skip;
    auto base = GetParam().open(&skip);
    if (!base) GTEST_SKIP() << skip;
    engine::FaultInjectionOptions fo;
    fo.unknown_not_applied = 0.15;
    fo.unknown_applied = 0.15;
    fo.seed = 7;
    faulty_ = std::make_shared<engine::FaultInjectionEngine>(base->engine(), fo);
    db_ = std::make_shared<Database>(faulty_, "faulty-" + GetParam().name);
    base_ = base;
  }

  void TearDown() override {
    if (db_) testing::record_faults(*db_);
  }

  // Pops until empty (pops are idempotent too, so faults stay on).
  std::vector<std::string> drain(Queue& q) {
    std::vector<std::string> out;
    while (auto v = q.pop()) out.push_back(*v);
    return out;
  }

  std::shared_ptr<Database> base_, db_;
  std::shared_ptr<engine::FaultInjectionEngine> faulty_;
};

std::vector<std::string> values(const std::string& tag, int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(tag + "-" + std::to_string(i));
  return out;
}

TEST_P(CliPushTest, PushValuesPushesEachValueOnceInOrderDespiteUnknownResults) {
  Queue q(db_, Subspace(Tuple().append("Q").append("one")));
  const auto pushed = values("v", 120);
  // 60 commands of two values (each one push batch: one transaction), so that faults hit some.
  for (std::size_t i = 0; i < pushed.size(); i += 2) {
    cli::push_values(cli::queue_pushers(q), {pushed[i], pushed[i + 1]}, "queue push", false);
  }
  EXPECT_GT(faulty_->injected_applied(), 0u) << "no applied-but-unknown commit was injected";
  EXPECT_EQ(q.size(), static_cast<std::int64_t>(pushed.size()));
  EXPECT_EQ(drain(q), pushed);
}

TEST_P(CliPushTest, ConcurrentPushValuesLoseAndDuplicateNothingAndKeepEachClientsOrder) {
  Queue q(db_, Subspace(Tuple().append("Q").append("many")));
  constexpr int kClients = 4, kCommands = 8, kPerCommand = 5, kEach = kCommands * kPerCommand;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&q, c] {  // client c runs `kvq queue push` kCommands times
      const auto all = values("c" + std::to_string(c), kEach);
      for (int k = 0; k < kCommands; ++k) {
        const std::vector<std::string> some(all.begin() + k * kPerCommand,
                                            all.begin() + (k + 1) * kPerCommand);
        cli::push_values(cli::queue_pushers(q), some, "queue push", false);
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_GT(faulty_->injected_applied(), 0u);
  // The whole history: each value once, and each client's values in its order.
  std::map<std::string, std::vector<std::string>> by_client;
  for (const auto& v : drain(q)) by_client[v.substr(0, v.find('-'))].push_back(v);
  ASSERT_EQ(by_client.size(), static_cast<std::size_t>(kClients));
  for (int c = 0; c < kClients; ++c) {
    const std::string tag = "c" + std::to_string(c);
    EXPECT_EQ(by_client[tag], values(tag, kEach)) << tag;
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, CliPushTest, ::testing::ValuesIn(testing::layer_engines()),
                         [](const auto& info) { return info.param.name; });

TEST(CliBytesTest, UnescapeIsTheExactInverseOfEscapeForEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(cli::unescape(cli::escape(all)), all);
  std::mt19937 gen(11);
  for (int i = 0; i < 200; ++i) {
    std::string s(gen() % 40, '\0');
    for (char& c : s) c = "\\x09aZ\xff\x00"[gen() % 8];  // backslashes next to 'x' and digits
    EXPECT_EQ(cli::unescape(cli::escape(s)), s) << cli::escape(s);
  }
  EXPECT_EQ(cli::escape("a\\x41"), "a\\\\x41") << "a backslash is always escaped itself";
  EXPECT_EQ(cli::unescape("plain tenant"), "plain tenant");
  EXPECT_EQ(cli::unescape("\\x41\\x5a\\x5A\\\\"), "AZZ\\");
}

TEST(CliBytesTest, MalformedEscapesAreUsageErrors) {
  for (const char* bad : {"\\", "a\\", "\\q", "\\n", "\\x", "\\x4", "\\xg1", "\\x1g", "\\X41"}) {
    try {
      cli::unescape(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const cli::CliError& e) {
      EXPECT_EQ(e.exit_code(), cli::kExitUsage) << bad;
      EXPECT_NE(std::string(e.what()).find("malformed escape at byte"), std::string::npos) << bad;
    }
  }
}

TEST(CliBytesTest, PutBytesKeepsValidUtf8AsTextAndAnythingElseAsBase64) {
  const std::vector<std::pair<std::string, bool>> cases = {
      {"", true},
      {std::string("nul \0 tab \t", 11), true},
      {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", true},  // 2-, 3- and 4-byte forms
      {"\xf4\x8f\xbf\xbf", true},                           // U+10FFFF, the last code point
      {"\xc0\x80", false},                                  // overlong NUL
      {"\xe0\x9f\xbf", false},                              // overlong 3-byte form
      {"\xed\xa0\x80", false},                              // a surrogate (U+D800)
      {"\xf4\x90\x80\x80", false},                          // over U+10FFFF
      {"\xc3", false},                                      // truncated
      {"a\xff", false},
  };
  for (const auto& [bytes, text] : cases) {
    nlohmann::json j = nlohmann::json::object();
    cli::put_bytes(j, "value", bytes);
    SCOPED_TRACE(cli::escape(bytes));
    EXPECT_EQ(j.size(), 1U);
    EXPECT_EQ(j.contains("value"), text);
    EXPECT_EQ(j.contains("value_base64"), !text);
    if (text) {
      EXPECT_EQ(j["value"], bytes);
    }
    EXPECT_NO_THROW(cli::json_line(j));
  }
  nlohmann::json j = nlohmann::json::object();
  cli::put_bytes(j, "v", "a\xff");
  EXPECT_EQ(j["v_base64"], "Yf8=");
  cli::put_bytes(j, "w", "\xff\xfe\xfd");
  EXPECT_EQ(j["w_base64"], "//79");
  cli::put_bytes(j, "x", "\x80\x81\x82\x83");
  EXPECT_EQ(j["x_base64"], "gIGCgw==");
}

// dead-letters --json: value and reason that are not UTF-8 come as value_base64 / reason_base64,
// not with U+FFFD in place of their bytes.
TEST(CliBytesTest, DeadLettersJsonGivesBackBytesThatAreNotUtf8) {
  DeadLetter bad;
  bad.value = std::string("\x00\xfe\xff\x80x", 5);
  bad.attempts = 3;
  bad.reason = "c\xc3(";
  DeadLetter good;
  good.value = "ok";
  good.reason = "timeout \xe2\x8f\xb0";
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(cli::print_dead_letters({bad, good}, /*json=*/true), cli::kExitOk);
  auto j = nlohmann::json::parse(::testing::internal::GetCapturedStdout());
  ASSERT_EQ(j.size(), 2U);
  EXPECT_EQ(j[0]["value_base64"], "AP7/gHg=");
  EXPECT_EQ(j[0]["reason_base64"], "Y8Mo");
  EXPECT_EQ(j[0]["attempts"], 3);
  EXPECT_FALSE(j[0].contains("value") || j[0].contains("reason"));
  EXPECT_EQ(j[1]["value"], "ok");
  EXPECT_EQ(j[1]["reason"], "timeout \xe2\x8f\xb0");
}

}  // namespace
}  // namespace kvq
