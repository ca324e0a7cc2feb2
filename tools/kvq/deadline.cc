// The deadline of a command with --wait (deadline.h).
#include "tools/kvq/deadline.h"

#include <utility>
#include <vector>

namespace kvq::cli {

void CommandDeadline::arm(std::chrono::milliseconds wait) {
  std::lock_guard<std::mutex> lock(mu_);
  wait_ = wait;
  deadline_ = Clock::now() + wait + kAttemptGrace;
  refused_ = false;
  last_failure_.clear();
}

void CommandDeadline::disarm() {
  std::lock_guard<std::mutex> lock(mu_);
  deadline_.reset();
}

bool CommandDeadline::armed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return deadline_.has_value();
}

void CommandDeadline::check() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!deadline_ || Clock::now() < *deadline_) return;
  refused_ = true;
  throw Error(ErrorCode::kTransactionTimedOut, "--wait " + std::to_string(wait_.count()) +
                                                   "ms ran out (kvq refuses the command's " +
                                                   "reads and commits after it)");
}

void CommandDeadline::note_commit(const Error* failure) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure == nullptr) {
    last_failure_.clear();
  } else if (failure->retryable()) {
    last_failure_ = failure->what();
  }
}

bool CommandDeadline::gave_up() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_ || !last_failure_.empty();
}

void CommandDeadline::throw_timed_out() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string message =
      "gave up: --wait " + std::to_string(wait_.count()) +
      "ms ran out before a transaction could commit (the queue was not seen empty)";
  if (!last_failure_.empty()) message += "; last error: " + last_failure_;
  throw Error(ErrorCode::kTimedOut, message);
}

namespace {

// A session that asks `deadline` before each read and commit of `base`.
class DeadlineSession final : public engine::Session {
 public:
  DeadlineSession(std::unique_ptr<engine::Session> base, std::shared_ptr<CommandDeadline> deadline)
      : base_(std::move(base)), deadline_(std::move(deadline)) {}

  Version read_version() override { return base_->read_version(); }
  std::optional<std::string> get(std::string_view key) override {
    deadline_->check();
    return base_->get(key);
  }
  std::vector<KeyValue> get_range(std::string_view begin, std::string_view end, int limit,
                                  bool reverse) override {
    deadline_->check();
    return base_->get_range(begin, end, limit, reverse);
  }
  void prefetch(std::span<const engine::RangeQuery> queries) override { base_->prefetch(queries); }
  engine::CommitResult commit(engine::CommitRequest request) override {
    deadline_->check();
    try {
      engine::CommitResult result = base_->commit(std::move(request));
      deadline_->note_commit(nullptr);
      return result;
    } catch (const Error& e) {
      deadline_->note_commit(&e);
      throw;
    }
  }
  std::size_t operations(const std::vector<engine::KeyRange>& read_conflicts,
                         const std::vector<engine::Mutation>& mutations) override {
    return base_->operations(read_conflicts, mutations);
  }

 private:
  std::unique_ptr<engine::Session> base_;
  std::shared_ptr<CommandDeadline> deadline_;
};

}  // namespace

DeadlineEngine::DeadlineEngine(std::shared_ptr<engine::Engine> base,
                               std::shared_ptr<CommandDeadline> deadline)
    : base_(std::move(base)), deadline_(std::move(deadline)) {
  if (!base_ || !deadline_) {
    throw Error(ErrorCode::kInvalidArgument, "DeadlineEngine needs an engine and a deadline");
  }
}

std::unique_ptr<engine::Session> DeadlineEngine::begin() {
  return std::make_unique<DeadlineSession>(base_->begin(), deadline_);
}

void DeadlineEngine::watch(std::string key, std::optional<std::string> value_seen, Version version,
                           std::shared_ptr<detail::WatchState> state) {
  base_->watch(std::move(key), std::move(value_seen), version, std::move(state));
}

}  // namespace kvq::cli
