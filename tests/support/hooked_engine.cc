#include "support/hooked_engine.h"

#include <thread>
#include <utility>
#include <vector>

#include "engine/watch_state.h"

namespace kvq::testing {

class HookedEngine::HookedSession final : public engine::Session {
 public:
  HookedSession(HookedEngine& engine, std::unique_ptr<engine::Session> base)
      : engine_(engine), base_(std::move(base)) {}
  Version read_version() override {
    engine_.reachable(/*or_throw=*/true);
    return base_->read_version();
  }
  std::optional<std::string> get(std::string_view key) override {
    engine_.reachable(/*or_throw=*/true);
    return base_->get(key);
  }
  std::vector<KeyValue> get_range(std::string_view begin, std::string_view end, int limit,
                                  bool reverse) override {
    if (std::function<void()> event = engine_.take_read_event(begin, limit)) event();
    engine_.reachable(/*or_throw=*/true);
    return base_->get_range(begin, end, limit, reverse);
  }
  void prefetch(std::span<const engine::RangeQuery> queries) override {
    if (engine_.reachable(/*or_throw=*/false)) base_->prefetch(queries);
  }
  void note_absent(std::string_view key) override { base_->note_absent(key); }
  engine::CommitResult commit(engine::CommitRequest request) override {
    engine_.reachable(/*or_throw=*/true);
    if (std::function<void()> event = engine_.take_commit_event(request)) event();
    std::this_thread::sleep_for(engine_.commit_delay());
    return base_->commit(std::move(request));
  }
  std::size_t operations(const std::vector<KeyRange>& read_conflicts,
                         const std::vector<engine::Mutation>& mutations) override {
    return base_->operations(read_conflicts, mutations);
  }

 private:
  HookedEngine& engine_;
  std::unique_ptr<engine::Session> base_;
};

void HookedEngine::before_read(std::string begin, int limit, std::function<void()> event) {
  std::lock_guard lock(mu_);
  read_trigger_ = ReadTrigger{std::move(begin), limit, std::move(event)};
}

void HookedEngine::before_commit(std::function<void()> event) {
  before_commit_matching({}, std::move(event));
}

void HookedEngine::before_commit_matching(std::function<bool(const engine::CommitRequest&)> matches,
                                          std::function<void()> event) {
  std::lock_guard lock(mu_);
  commit_matches_ = std::move(matches);
  commit_event_ = std::move(event);
}

void HookedEngine::unreachable_for(std::chrono::milliseconds outage) {
  std::lock_guard lock(mu_);
  unreachable_until_ = std::chrono::steady_clock::now() + outage;
}

bool HookedEngine::reachable(bool or_throw) {
  std::chrono::steady_clock::time_point until;
  {
    std::lock_guard lock(mu_);
    until = unreachable_until_;
  }
  if (std::chrono::steady_clock::now() >= until) return true;
  if (or_throw) throw Error(ErrorCode::kConnectionFailed, "hooked engine: unreachable");
  return false;
}

void HookedEngine::fail_next_watch(Error error) {
  std::lock_guard lock(mu_);
  watch_error_ = std::move(error);
}

void HookedEngine::report_limits(TransactionLimits limits) {
  std::lock_guard lock(mu_);
  limits_ = limits;
}

TransactionLimits HookedEngine::limits() const {
  std::lock_guard lock(mu_);
  return limits_ ? *limits_ : base_->limits();
}

void HookedEngine::slow_commits(std::chrono::milliseconds each) {
  std::lock_guard lock(mu_);
  commit_delay_ = each;
}

std::chrono::milliseconds HookedEngine::commit_delay() {
  std::lock_guard lock(mu_);
  return commit_delay_;
}

std::unique_ptr<engine::Session> HookedEngine::begin() {
  return std::make_unique<HookedSession>(*this, base_->begin());
}

void HookedEngine::watch(std::string key, std::optional<std::string> value_seen, Version version,
                         std::shared_ptr<detail::WatchState> state) {
  std::optional<Error> error;
  {
    std::lock_guard lock(mu_);
    error.swap(watch_error_);
  }
  if (error) return state->fail(*error);
  base_->watch(std::move(key), std::move(value_seen), version, std::move(state));
}

std::function<void()> HookedEngine::take_read_event(std::string_view begin, int limit) {
  std::lock_guard lock(mu_);
  if (!read_trigger_ || read_trigger_->begin != begin || read_trigger_->limit != limit) return {};
  std::function<void()> event = std::move(read_trigger_->event);
  read_trigger_.reset();
  return event;
}

std::function<void()> HookedEngine::take_commit_event(const engine::CommitRequest& request) {
  std::lock_guard lock(mu_);
  if (!commit_event_ || (commit_matches_ && !commit_matches_(request))) return {};
  commit_matches_ = {};
  return std::exchange(commit_event_, {});
}

}  // namespace kvq::testing
