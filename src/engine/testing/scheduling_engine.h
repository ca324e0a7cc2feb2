// An Engine wrapper for the simulator (kvq simulate): before every engine call (a read version, a
// read, a commit, a watch) it gives its SimulatedClock a scheduling point, so that the clients of
// SimulatedClock::run interleave at every step that touches the database, in an order chosen by
// the run's seed. Everything passes through unchanged.
//
// Example:
//   kvq::common::SimulatedClock clock;
//   kvq::common::ScopedClock installed(clock);
//   auto memory = kvq::open("memory:")->engine();
//   auto db = std::make_shared<kvq::Database>(
//       std::make_shared<kvq::engine::SchedulingEngine>(memory, clock), "simulated:");
//   clock.run(3, seed, [&](int client) { /* use db */ });
//
// Thread safety: as the wrapped engine; `clock` must outlive the engine.
#ifndef KVQ_SRC_ENGINE_TESTING_SCHEDULING_ENGINE_H_
#define KVQ_SRC_ENGINE_TESTING_SCHEDULING_ENGINE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/simulated_clock.h"
#include "engine/engine.h"

namespace kvq::engine {

class SchedulingEngine final : public Engine {
 public:
  // Wraps `base` (not null), yielding to `clock` before each of its calls.
  SchedulingEngine(std::shared_ptr<Engine> base, common::SimulatedClock& clock);

  std::unique_ptr<Session> begin() override;
  void watch(std::string key, std::optional<std::string> value_seen, Version version,
             std::shared_ptr<detail::WatchState> state) override;
  std::uint64_t commit_batches() const override;
  TransactionLimits limits() const override;
  bool commits_can_be_unknown() const override;
  bool reads_take_round_trips() const override { return base_->reads_take_round_trips(); }

 private:
  class SchedulingSession;

  std::shared_ptr<Engine> base_;
  common::SimulatedClock& clock_;
};

}  // namespace kvq::engine

#endif  // KVQ_SRC_ENGINE_TESTING_SCHEDULING_ENGINE_H_
