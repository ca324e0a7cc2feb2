// The CLI's push code (tools/kvq/commands.h: push_values, what `kvq queue push A B C` runs) on a
// database whose engine injects commit_unknown_result, applied and not applied: every value is
// pushed exactly once and comes out in the order given, also with several clients pushing at once.
// (The CLI once pushed all values in one transaction of its own retry loop without a marker, so a
// commit that applied but reported commit_unknown_result was pushed again; it now uses the layer's
// push_batch, one transaction with an idempotency marker.)
#include <gtest/gtest.h>

#include <map>
#include <memory>
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
    cli::push_values(q, {pushed[i], pushed[i + 1]}, "queue push");
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
        cli::push_values(q, some, "queue push");
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

}  // namespace
}  // namespace kvq
