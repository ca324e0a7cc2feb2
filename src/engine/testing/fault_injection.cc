#include "engine/testing/fault_injection.h"

namespace kvq::engine {

namespace {
void validate(const FaultInjectionOptions& o) {
  auto bad = [](double p) { return !(p >= 0.0 && p <= 1.0); };
  if (bad(o.unknown_not_applied) || bad(o.unknown_applied) ||
      o.unknown_not_applied + o.unknown_applied > 1.0) {
    throw Error(ErrorCode::kInvalidOptionValue,
                "fault probabilities must be in [0, 1] and sum to at most 1");
  }
}
}  // namespace

class FaultInjectionEngine::FaultySession final : public Session {
 public:
  FaultySession(std::shared_ptr<FaultInjectionEngine> owner, std::unique_ptr<Session> base)
      : owner_(std::move(owner)), base_(std::move(base)) {}
  Version read_version() override { return base_->read_version(); }
  std::optional<std::string> get(std::string_view key) override { return base_->get(key); }
  std::vector<KeyValue> get_range(std::string_view begin, std::string_view end, int limit,
                                  bool reverse) override {
    return base_->get_range(begin, end, limit, reverse);
  }
  CommitResult commit(CommitRequest request) override {
    const Fault fault = owner_->draw();
    if (fault == Fault::kNotApplied) {
      owner_->not_applied_.fetch_add(1);
      throw Error(ErrorCode::kCommitUnknownResult, "injected fault: commit not applied");
    }
    CommitResult result = base_->commit(std::move(request));
    if (fault == Fault::kApplied) {
      owner_->applied_.fetch_add(1);
      throw Error(ErrorCode::kCommitUnknownResult, "injected fault: commit applied");
    }
    return result;
  }
  std::size_t operations(const std::vector<KeyRange>& read_conflicts,
                         const std::vector<Mutation>& mutations) override {
    return base_->operations(read_conflicts, mutations);
  }

 private:
  std::shared_ptr<FaultInjectionEngine> owner_;
  std::unique_ptr<Session> base_;
};

FaultInjectionEngine::FaultInjectionEngine(std::shared_ptr<Engine> base,
                                           FaultInjectionOptions options)
    : base_(std::move(base)), options_(options), rng_(options.seed) {
  if (!base_) throw Error(ErrorCode::kInvalidArgument, "FaultInjectionEngine needs an engine");
  validate(options);
}

std::unique_ptr<Session> FaultInjectionEngine::begin() {
  return std::make_unique<FaultySession>(shared_from_this(), base_->begin());
}

void FaultInjectionEngine::watch(std::string key, std::optional<std::string> value_seen,
                                 Version version, std::shared_ptr<detail::WatchState> state) {
  base_->watch(std::move(key), std::move(value_seen), version, std::move(state));
}

std::uint64_t FaultInjectionEngine::commit_batches() const { return base_->commit_batches(); }

TransactionLimits FaultInjectionEngine::limits() const { return base_->limits(); }

void FaultInjectionEngine::set_options(FaultInjectionOptions options) {
  validate(options);
  std::lock_guard<std::mutex> lock(mu_);
  options_ = options;
}

FaultInjectionEngine::Fault FaultInjectionEngine::draw() {
  std::lock_guard<std::mutex> lock(mu_);
  const double r = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  if (r < options_.unknown_not_applied) return Fault::kNotApplied;
  if (r < options_.unknown_not_applied + options_.unknown_applied) return Fault::kApplied;
  return Fault::kNone;
}

}  // namespace kvq::engine
