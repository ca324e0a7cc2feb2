// An engine wrapper for tests that need another client's step at an exact moment of a layer's
// transaction: it passes everything to the wrapped engine (reads, hints, limits, commits, watches),
// except that, once each, it runs a callback before a given range read or before a commit (which
// may throw, failing that commit without it reaching the wrapped engine), and fails a watch with a
// given error; and that it can be unreachable for a while, slow to commit, or report smaller
// transaction limits.
//
// Example:
//   auto hooked = std::make_shared<HookedEngine>(db->engine());
//   auto hooked_db = std::make_shared<Database>(hooked, "hooked");
//   hooked->before_commit([&] { other.push("x"); });  // lands between the reads and the commit
#ifndef KVQ_TESTS_SUPPORT_HOOKED_ENGINE_H_
#define KVQ_TESTS_SUPPORT_HOOKED_ENGINE_H_

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "engine/engine.h"
#include "kvq/error.h"

namespace kvq::testing {

class HookedEngine final : public engine::Engine {
 public:
  explicit HookedEngine(std::shared_ptr<engine::Engine> base) : base_(std::move(base)) {}

  // Runs `event` before the first range read of [begin, ...) with `limit` (once; in the reading
  // session, before the read fixes its version unless an earlier read or prefetch of the session
  // did: on etcd a prefetch fixes it, and answers the read from what it fetched).
  void before_read(std::string begin, int limit, std::function<void()> event);
  // Runs `event` before the next commit reaches the wrapped engine (once; the commit then goes on
  // with the reads it made before, unless `event` throws: then the commit throws that).
  void before_commit(std::function<void()> event);
  // As before_commit, before the next commit whose request `matches`.
  void before_commit_matching(std::function<bool(const engine::CommitRequest&)> matches,
                              std::function<void()> event);
  // For `outage` from now, every read and commit throws connection_failed (prefetches are
  // dropped, as an engine's best-effort prefetch would be), as if the server could not be reached.
  void unreachable_for(std::chrono::milliseconds outage);
  // Fails the next watch registered with `error`.
  void fail_next_watch(Error error);
  // Reports `limits` as the engine's (the layers fit their transactions to them; the wrapped
  // engine keeps its own).
  void report_limits(TransactionLimits limits);
  // Every commit from now on waits `each` before it reaches the wrapped engine.
  void slow_commits(std::chrono::milliseconds each);

  std::unique_ptr<engine::Session> begin() override;
  void watch(std::string key, std::optional<std::string> value_seen, Version version,
             std::shared_ptr<detail::WatchState> state) override;
  std::uint64_t commit_batches() const override { return base_->commit_batches(); }
  TransactionLimits limits() const override;
  bool commits_can_be_unknown() const override { return base_->commits_can_be_unknown(); }
  bool reads_take_round_trips() const override { return base_->reads_take_round_trips(); }

 private:
  class HookedSession;
  struct ReadTrigger {
    std::string begin;
    int limit;
    std::function<void()> event;
  };
  // The event due before a read of [begin, ...) with `limit`, or before a commit (taken: each
  // runs once); empty if none is.
  std::function<void()> take_read_event(std::string_view begin, int limit);
  std::function<void()> take_commit_event(const engine::CommitRequest& request);
  std::chrono::milliseconds commit_delay();
  // Whether the engine is reachable now; throws connection_failed if not and `or_throw`.
  bool reachable(bool or_throw);

  std::shared_ptr<engine::Engine> base_;
  mutable std::mutex mu_;
  std::optional<ReadTrigger> read_trigger_;
  std::function<void()> commit_event_;
  std::function<bool(const engine::CommitRequest&)> commit_matches_;  // empty: any commit
  std::chrono::steady_clock::time_point unreachable_until_;
  std::optional<Error> watch_error_;
  std::optional<TransactionLimits> limits_;
  std::chrono::milliseconds commit_delay_{0};
};

}  // namespace kvq::testing

#endif  // KVQ_TESTS_SUPPORT_HOOKED_ENGINE_H_
