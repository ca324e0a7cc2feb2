// How `--wait` bounds a whole command. kvq's retry loops retry retryable errors (not_committed,
// commit_unknown_result, transaction_too_old, ...) for as long as they come, as FoundationDB's do;
// a command whose commits keep failing (`memory:?conflict_rate=1`, a hot spot) would never end.
// A command with --wait W arms its Context's CommandDeadline before it opens the database;
// Context::open() then puts a DeadlineEngine under the Database, which refuses every read and
// commit once W plus kAttemptGrace has passed (transaction_timed_out, final: the retry loops stop;
// a refused commit never reaches the engine, so nothing is left in doubt). bounded_wait() runs the
// command's wait and turns giving up into timed_out (exit 1) instead of an empty result (exit 3).
//
// Example (cmd_work.cc):
//   ctx.bound_by_wait(args.wait_ms);            // before ctx.open()
//   Queue q = open();
//   std::optional<Lease> l = bounded_wait<Lease>(*ctx.deadline, [&] { return q.take_wait(...); });
//
// Thread safety: a CommandDeadline may be used by any number of threads.
#ifndef KVQ_TOOLS_KVQ_DEADLINE_H_
#define KVQ_TOOLS_KVQ_DEADLINE_H_

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "kvq/kvq.h"

namespace kvq::cli {

// What a wait may take past its --wait: the layers let a pop or take attempt under way when the
// wait runs out finish (waiting.cc, kPopAttemptFloor), so that an empty queue still ends in
// "empty" (exit 3), not in a refused last look.
inline constexpr std::chrono::milliseconds kAttemptGrace{1000};

class CommandDeadline {
 public:
  using Clock = std::chrono::steady_clock;

  // Arms the deadline at now + `wait` + kAttemptGrace (`wait` is named in messages).
  void arm(std::chrono::milliseconds wait);
  // Disarms it: the rest of the command (e.g. a batch after the waited-for item) is not bounded.
  void disarm();
  // Whether it is armed (Context::open() then adds a DeadlineEngine).
  bool armed() const;
  // Throws transaction_timed_out (and remembers it) if armed and passed. DeadlineEngine calls it
  // before every read and commit.
  void check();
  // Notes the outcome of a commit that reached the engine: `failure` is its error, or null if it
  // succeeded. Only retryable errors count as failures (the others end the command anyway).
  void note_commit(const Error* failure);
  // Whether the command gave up: the deadline refused a read or commit, or the last commit that
  // reached the engine failed with a retryable error (so an empty result proves nothing).
  bool gave_up() const;
  // Throws timed_out (1004) saying that --wait ran out before a transaction could commit, with
  // the last retryable error if there was one.
  [[noreturn]] void throw_timed_out() const;

 private:
  mutable std::mutex mu_;
  std::optional<Clock::time_point> deadline_;
  std::chrono::milliseconds wait_{0};
  bool refused_ = false;
  std::string last_failure_;  // what() of the last commit's retryable error; "" after a success
};

// An engine that checks `deadline` before each read and commit of its sessions and notes each
// commit's outcome; everything else goes to the wrapped engine unchanged.
class DeadlineEngine final : public engine::Engine {
 public:
  // Wraps `base` (not null).
  DeadlineEngine(std::shared_ptr<engine::Engine> base, std::shared_ptr<CommandDeadline> deadline);

  std::unique_ptr<engine::Session> begin() override;
  void watch(std::string key, std::optional<std::string> value_seen, Version version,
             std::shared_ptr<detail::WatchState> state) override;
  std::uint64_t commit_batches() const override { return base_->commit_batches(); }
  TransactionLimits limits() const override { return base_->limits(); }
  bool commits_can_be_unknown() const override { return base_->commits_can_be_unknown(); }
  bool reads_take_round_trips() const override { return base_->reads_take_round_trips(); }

 private:
  std::shared_ptr<engine::Engine> base_;
  std::shared_ptr<CommandDeadline> deadline_;
};

// Runs `wait` (a command's blocking pop or take; the caller armed `deadline` and opened the
// database after) and returns what it returns. If the command gave up (CommandDeadline::gave_up)
// and `wait` returned nothing or threw timed_out / transaction_timed_out, throws timed_out
// instead (throw_timed_out). Otherwise disarms the deadline (what follows is not bounded) and
// returns. Other errors pass through.
template <typename T>
std::optional<T> bounded_wait(CommandDeadline& deadline,
                              const std::function<std::optional<T>()>& wait) {
  std::optional<T> out;
  try {
    out = wait();
  } catch (const Error& e) {
    const bool timeout =
        e.code() == ErrorCode::kTimedOut || e.code() == ErrorCode::kTransactionTimedOut;
    if (timeout && deadline.gave_up()) deadline.throw_timed_out();
    throw;
  }
  if (!out && deadline.gave_up()) deadline.throw_timed_out();
  deadline.disarm();
  return out;
}

}  // namespace kvq::cli

#endif  // KVQ_TOOLS_KVQ_DEADLINE_H_
