// An Engine wrapper that injects faults, in the spirit of LevelDB's EnvWrapper, so that code built
// on kvq (the layers, and users' own transactions) can be tested against the errors a real cluster
// gives. With the configured probabilities:
//   - a commit throws commit_unknown_result (1021) either without reaching the wrapped engine (not
//     applied) or after the wrapped engine committed it (applied);
//   - a commit throws not_committed (1020) without reaching the wrapped engine (a spurious
//     conflict);
//   - a read throws transaction_too_old (1007);
//   - every commit is delayed by a fixed time.
// Everything else passes through. Users reach it through the URL of any engine (docs/engines.md):
//   kvq::open("memory:?unknown_result_rate=0.2&fault_seed=7")
//   kvq::open("rocksdb:/data?conflict_rate=0.05&too_old_rate=0.01&delay_ms=2")
//
// Example:
//   auto base = kvq::open("memory:");
//   auto faulty = std::make_shared<kvq::engine::FaultInjectionEngine>(
//       base->engine(), kvq::engine::FaultInjectionOptions{.unknown_not_applied = 0.1,
//                                                          .unknown_applied = 0.1});
//   auto db = std::make_shared<kvq::Database>(faulty, "faulty-memory:");
//
// Thread safety: thread-safe like any Engine; the random draws are serialised.
#ifndef KVQ_SRC_ENGINE_TESTING_FAULT_INJECTION_H_
#define KVQ_SRC_ENGINE_TESTING_FAULT_INJECTION_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>

#include "engine/engine.h"

namespace kvq::engine {

struct FaultInjectionOptions {
  // Probability that a commit fails with commit_unknown_result and was NOT applied. Default 0.
  double unknown_not_applied = 0.0;
  // Probability that a commit fails with commit_unknown_result although it WAS applied. Default 0.
  double unknown_applied = 0.0;
  // Probability that a commit fails with a spurious not_committed (not applied). Default 0.
  double conflict = 0.0;
  // Probability that a read (get or range read) fails with transaction_too_old. Default 0.
  double too_old = 0.0;
  // Added latency of every commit. Default 0.
  std::chrono::milliseconds commit_delay{0};
  // Seed of the random draws (deterministic per seed for one thread). Default 1.
  std::uint64_t seed = 1;
};

// Takes the fault-injection options out of an engine URL's query parameters and returns them, or
// nullopt if none is present (the engine is then not wrapped):
//   unknown_result_rate=P  commit_unknown_result with probability P, half applied, half not
//   conflict_rate=P        spurious not_committed with probability P
//   too_old_rate=P         transaction_too_old on reads with probability P
//   delay_ms=N             N ms of latency per commit
//   fault_seed=N           the seed (the same faults for the same seed, for one thread)
// Throws connection_string_invalid for a rate that is not a number in [0, 1], rates whose commit
// faults sum over 1, or a delay or seed that is not a non-negative integer.
std::optional<FaultInjectionOptions> take_fault_options(std::map<std::string, std::string>& query);

class FaultInjectionEngine final : public Engine,
                                   public std::enable_shared_from_this<FaultInjectionEngine> {
 public:
  // Wraps `base` (not null). Throws invalid_option_value for probabilities outside [0, 1], commit
  // fault probabilities summing over 1, or a negative delay.
  FaultInjectionEngine(std::shared_ptr<Engine> base, FaultInjectionOptions options);

  std::unique_ptr<Session> begin() override;
  void watch(std::string key, std::optional<std::string> value_seen, Version version,
             std::shared_ptr<detail::WatchState> state) override;
  std::uint64_t commit_batches() const override;
  TransactionLimits limits() const override;
  // True, whatever the rates: the injector stands for a cluster, whose commits can end so.
  bool commits_can_be_unknown() const override { return true; }
  bool reads_take_round_trips() const override { return base_->reads_take_round_trips(); }

  // Changes the probabilities (e.g. to turn faults off for a final check). Thread-safe.
  void set_options(FaultInjectionOptions options);

  // A late commit, as etcd can apply a proposal after its RPC timed out: the next commit fails
  // with commit_unknown_result without reaching the wrapped engine, and is held until
  // land_held() sends it there, with its own read version and read conflicts (so it lands only
  // if nothing it read was written since). land_held returns whether it landed (false if it
  // conflicted or none is held). Thread-safe.
  void hold_next_commit();
  bool land_held();

  // Faults injected so far.
  std::uint64_t injected_not_applied() const { return not_applied_.load(); }
  std::uint64_t injected_applied() const { return applied_.load(); }
  std::uint64_t injected_conflicts() const { return conflicts_.load(); }
  std::uint64_t injected_too_old() const { return too_old_.load(); }

 private:
  class FaultySession;
  enum class Fault { kNone, kNotApplied, kApplied, kConflict, kHeld };
  // The fault of the next commit (and sleeps the configured delay).
  Fault draw_commit();
  // Whether the next read fails with transaction_too_old.
  bool draw_too_old();

  std::shared_ptr<Engine> base_;
  std::mutex mu_;
  FaultInjectionOptions options_;
  std::mt19937_64 rng_;
  std::atomic<std::uint64_t> not_applied_{0};
  std::atomic<std::uint64_t> applied_{0};
  std::atomic<std::uint64_t> conflicts_{0};
  std::atomic<std::uint64_t> too_old_{0};
  // A commit held by hold_next_commit(), with the wrapped session it was made in.
  struct Held {
    std::unique_ptr<Session> session;
    CommitRequest request;
  };
  bool hold_next_ = false;    // under mu_
  std::optional<Held> held_;  // under mu_
};

}  // namespace kvq::engine

#endif  // KVQ_SRC_ENGINE_TESTING_FAULT_INJECTION_H_
