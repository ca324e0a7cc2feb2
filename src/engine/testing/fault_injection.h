// Internal (for tests): an Engine wrapper that injects faults into commits, in the spirit of
// LevelDB's EnvWrapper. With the configured probabilities a commit throws
// commit_unknown_result (1021) either without reaching the wrapped engine (not applied) or after
// the wrapped engine committed it (applied). Everything else passes through. Layers use it to
// prove their retry loops are idempotent.
//
// Example:
//   auto base = kvq::open("memory:");
//   auto faulty = std::make_shared<kvq::engine::FaultInjectionEngine>(
//       base->engine(), kvq::engine::FaultInjectionOptions{.unknown_not_applied = 0.1,
//                                                          .unknown_applied = 0.1});
//   auto db = std::make_shared<kvq::Database>(faulty, "faulty-memory:");
//
// Thread safety: thread-safe like any Engine; the random draws are serialised.
#ifndef KVQ_SRC_ENGINE_FAULT_INJECTION_H_
#define KVQ_SRC_ENGINE_FAULT_INJECTION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>

#include "engine/engine.h"

namespace kvq::engine {

struct FaultInjectionOptions {
  // Probability that a commit fails with commit_unknown_result and was NOT applied. Default 0.
  double unknown_not_applied = 0.0;
  // Probability that a commit fails with commit_unknown_result although it WAS applied. Default 0.
  double unknown_applied = 0.0;
  // Seed of the random draws (deterministic per seed for one thread). Default 1.
  std::uint64_t seed = 1;
};

class FaultInjectionEngine final : public Engine,
                                   public std::enable_shared_from_this<FaultInjectionEngine> {
 public:
  // Wraps `base` (not null). Throws invalid_option_value for probabilities outside [0, 1] or
  // summing over 1.
  FaultInjectionEngine(std::shared_ptr<Engine> base, FaultInjectionOptions options);

  std::unique_ptr<Session> begin() override;
  void watch(std::string key, std::optional<std::string> value_seen, Version version,
             std::shared_ptr<detail::WatchState> state) override;
  std::uint64_t commit_batches() const override;
  TransactionLimits limits() const override;

  // Changes the probabilities (e.g. to turn faults off for a final check). Thread-safe.
  void set_options(FaultInjectionOptions options);

  // Faults injected so far.
  std::uint64_t injected_not_applied() const { return not_applied_.load(); }
  std::uint64_t injected_applied() const { return applied_.load(); }

 private:
  class FaultySession;
  enum class Fault { kNone, kNotApplied, kApplied };
  Fault draw();

  std::shared_ptr<Engine> base_;
  std::mutex mu_;
  FaultInjectionOptions options_;
  std::mt19937_64 rng_;
  std::atomic<std::uint64_t> not_applied_{0};
  std::atomic<std::uint64_t> applied_{0};
};

}  // namespace kvq::engine

#endif  // KVQ_SRC_ENGINE_FAULT_INJECTION_H_
