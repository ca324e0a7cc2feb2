#include "engine/testing/scheduling_engine.h"

#include <utility>
#include <vector>

#include "kvq/error.h"

namespace kvq::engine {

class SchedulingEngine::SchedulingSession final : public Session {
 public:
  SchedulingSession(std::unique_ptr<Session> base, common::SimulatedClock& clock)
      : base_(std::move(base)), clock_(clock) {}
  Version read_version() override {
    clock_.yield();
    return base_->read_version();
  }
  std::optional<std::string> get(std::string_view key) override {
    clock_.yield();
    return base_->get(key);
  }
  std::vector<KeyValue> get_range(std::string_view begin, std::string_view end, int limit,
                                  bool reverse) override {
    clock_.yield();
    return base_->get_range(begin, end, limit, reverse);
  }
  CommitResult commit(CommitRequest request) override {
    clock_.yield();
    return base_->commit(std::move(request));
  }
  std::size_t operations(const std::vector<KeyRange>& read_conflicts,
                         const std::vector<Mutation>& mutations) override {
    return base_->operations(read_conflicts, mutations);
  }

 private:
  std::unique_ptr<Session> base_;
  common::SimulatedClock& clock_;
};

SchedulingEngine::SchedulingEngine(std::shared_ptr<Engine> base, common::SimulatedClock& clock)
    : base_(std::move(base)), clock_(clock) {
  if (!base_) throw Error(ErrorCode::kInvalidArgument, "SchedulingEngine needs an engine");
}

std::unique_ptr<Session> SchedulingEngine::begin() {
  clock_.yield();
  return std::make_unique<SchedulingSession>(base_->begin(), clock_);
}

void SchedulingEngine::watch(std::string key, std::optional<std::string> value_seen,
                             Version version, std::shared_ptr<detail::WatchState> state) {
  clock_.yield();
  base_->watch(std::move(key), std::move(value_seen), version, std::move(state));
}

std::uint64_t SchedulingEngine::commit_batches() const { return base_->commit_batches(); }

TransactionLimits SchedulingEngine::limits() const { return base_->limits(); }

bool SchedulingEngine::commits_can_be_unknown() const { return base_->commits_can_be_unknown(); }

}  // namespace kvq::engine
