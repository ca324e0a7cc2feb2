// The fault-injecting engine wrapper (src/engine/fault_injection.h), and what it is for: retry
// loops that stay correct when commits end in commit_unknown_result.
#include "engine/testing/fault_injection.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "kvq/database.h"

namespace kvq {
namespace {

using engine::FaultInjectionEngine;
using engine::FaultInjectionOptions;

std::shared_ptr<FaultInjectionEngine> faulty(const std::shared_ptr<Database>& base,
                                             FaultInjectionOptions options) {
  return std::make_shared<FaultInjectionEngine>(base->engine(), options);
}

TEST(FaultInjection, UnknownResultNotAppliedLeavesNothingBehind) {
  auto base = open("memory:");
  auto engine = faulty(base, {.unknown_not_applied = 1.0});
  Database db(engine, "faulty");
  Transaction tr = db.create_transaction();
  tr.set("k", "v");
  try {
    tr.commit();
    FAIL() << "expected commit_unknown_result";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCommitUnknownResult);
    EXPECT_TRUE(e.maybe_committed());
    EXPECT_TRUE(e.retryable());
  }
  EXPECT_EQ(base->run([](Transaction& t) { return t.get("k"); }), std::nullopt);
  EXPECT_EQ(engine->injected_not_applied(), 1u);
}

TEST(FaultInjection, UnknownResultAppliedCommitsAnyway) {
  auto base = open("memory:");
  auto engine = faulty(base, {.unknown_applied = 1.0});
  Database db(engine, "faulty");
  Transaction tr = db.create_transaction();
  tr.set("k", "v");
  EXPECT_THROW(tr.commit(), Error);
  EXPECT_EQ(base->run([](Transaction& t) { return t.get("k"); }), "v");
  EXPECT_EQ(engine->injected_applied(), 1u);
}

TEST(FaultInjection, ReadsAndWatchesPassThrough) {
  auto base = open("memory:");
  base->run([](Transaction& t) { t.set("k", "v"); });
  auto engine = faulty(base, {});
  Database db(engine, "faulty");
  EXPECT_EQ(db.run([](Transaction& t) { return t.get("k"); }), "v");
  Transaction tr = db.create_transaction();
  Watch w = tr.watch("k");
  tr.commit();
  base->run([](Transaction& t) { t.set("k", "changed"); });
  EXPECT_TRUE(w.wait_for(std::chrono::seconds(10)));
}

TEST(FaultInjection, InvalidProbabilitiesAreRejected) {
  auto base = open("memory:");
  auto code = [&](FaultInjectionOptions o) {
    try {
      faulty(base, o);
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kUnknownError;
  };
  EXPECT_EQ(code({.unknown_not_applied = -0.1}), ErrorCode::kInvalidOptionValue);
  EXPECT_EQ(code({.unknown_applied = 1.5}), ErrorCode::kInvalidOptionValue);
  EXPECT_EQ(code({.unknown_not_applied = 0.6, .unknown_applied = 0.6}),
            ErrorCode::kInvalidOptionValue);
}

// The idempotence recipe: an id chosen outside the retry loop, checked inside it. Under 40%
// unknown results (half of them applied) every increment lands exactly once, while a naive loop
// double-counts.
TEST(FaultInjection, IdempotentRetryLoopCountsEveryOperationOnce) {
  auto base = open("memory:");
  auto engine = faulty(base, {.unknown_not_applied = 0.2, .unknown_applied = 0.2, .seed = 7});
  Database db(engine, "faulty");
  const int kThreads = 4, kPerThread = 250;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string id = "done/" + std::to_string(t) + "/" + std::to_string(i);
        db.run([&](Transaction& tr) {
          if (tr.get(id)) return;  // an earlier attempt committed after all
          tr.set(id, "");
          tr.atomic_add("count", 1);
        });
        db.run([&](Transaction& tr) { tr.atomic_add("naive", 1); });
      }
    });
  }
  for (auto& th : threads) th.join();
  engine->set_options({});
  auto count = db.run([](Transaction& t) { return t.get("count"); });
  auto naive = db.run([](Transaction& t) { return t.get("naive"); });
  auto le = [](const std::string& s) {
    std::int64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[i]);
    return v;
  };
  EXPECT_EQ(le(*count), kThreads * kPerThread);
  EXPECT_GT(le(*naive), kThreads * kPerThread) << "applied-but-unknown commits were retried";
  EXPECT_GT(engine->injected_applied(), 0u);
  EXPECT_GT(engine->injected_not_applied(), 0u);
}

}  // namespace
}  // namespace kvq
