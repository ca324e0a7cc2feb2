#include "engine/pipeline/commit_pipeline.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <optional>
#include <utility>
#include <vector>

#include "engine/pipeline/batch_resolver.h"
#include "engine/pipeline/conflict_checker.h"
#include "engine/pipeline/read_versions.h"
#include "engine/pipeline/watch_registry.h"
#include "engine/pipeline/write_group.h"

namespace kvq::pipeline {
namespace {

using engine::CommitRequest;
using engine::CommitResult;

class PipelineEngine;

class PipelineSession final : public engine::Session {
 public:
  explicit PipelineSession(std::shared_ptr<PipelineEngine> engine) : engine_(std::move(engine)) {}
  Version read_version() override;
  std::optional<std::string> get(std::string_view key) override;
  std::vector<KeyValue> get_range(std::string_view begin, std::string_view end, int limit,
                                  bool reverse) override;
  CommitResult commit(CommitRequest request) override;

 private:
  // The snapshot at the read version, taken (and its version pinned) on first use and checked
  // against the MVCC window on every use.
  const StoreSnapshot& snap();

  std::shared_ptr<PipelineEngine> engine_;
  std::shared_ptr<Pin> pin_;
  std::shared_ptr<const StoreSnapshot> snapshot_;
};

class PipelineEngine final : public engine::Engine,
                             public std::enable_shared_from_this<PipelineEngine> {
 public:
  PipelineEngine(std::unique_ptr<VersionedStore> store, PipelineOptions options)
      : store_(std::move(store)),
        versions_(store_->latest_version(),
                  static_cast<Version>(options.mvcc_window.count()) * 1000),
        group_(options.max_batch_transactions),
        resolver_(store_.get(), &checker_),
        watches_(store_.get()),
        last_version_(store_->latest_version()) {
    checker_.set_floor(last_version_);
  }

  std::unique_ptr<engine::Session> begin() override {
    return std::make_unique<PipelineSession>(shared_from_this());
  }

  void watch(std::string key, std::optional<std::string> value_seen, Version /*version*/,
             std::shared_ptr<detail::WatchState> state) override {
    watches_.add(std::move(key), std::move(value_seen), std::move(state));
  }

  std::uint64_t commit_batches() const override {
    return commit_batches_.load(std::memory_order_relaxed);
  }

  // A commit either applies in this process or fails before the store applies it: its outcome is
  // always known.
  bool commits_can_be_unknown() const override { return false; }

  // --- used by sessions ---

  // The pin of the newest version and a snapshot at (or after) it.
  void acquire(std::shared_ptr<Pin>& pin, std::shared_ptr<const StoreSnapshot>& snapshot) {
    pin = versions_.current();
    snapshot = store_->snapshot();
  }

  void check_read(Version read_version) const { versions_.check_read(read_version); }

  // Commits through the write group: this thread either leads a batch containing the request or
  // waits for the leader that takes it.
  CommitResult commit(CommitRequest request) {
    Writer w(&request);
    group_.commit(w, [this](std::vector<Writer*>& batch) { run_batch(batch); });
    if (w.error) throw *w.error;
    return std::move(w.result);
  }

 private:
  // The leader's step for one batch: process it. Unless the batch already reached the store,
  // whatever process() throws (a store read while resolving ADDs, bad_alloc, ...) fails every
  // transaction of the batch: none of them committed.
  void run_batch(std::vector<Writer*>& batch) noexcept {
    bool applied = false;
    try {
      process(batch, applied);
    } catch (const Error& e) {
      if (!applied) fail_all(batch, e);
    } catch (const std::exception& e) {
      if (!applied) {
        fail_all(batch,
                 Error(ErrorCode::kInternalError, std::string("commit pipeline: ") + e.what()));
      }
    }
  }

  // The phases of one batch, as FoundationDB's proxy + resolver + storage: version, collect
  // garbage below the floor, resolve (stamp, check, plain writes), apply, publish, notify.
  // Sets `applied` once the batch reached the store.
  void process(std::vector<Writer*>& batch, bool& applied) {
    const Version now = versions_.now();
    collect_garbage(now);
    // Taken before the resolver runs: a batch that fails inside it after the checker recorded its
    // writes leaves a gap, not a version used twice.
    const Version version = std::max(last_version_ + 1, now);
    last_version_ = version;
    ResolvedBatch resolved = resolver_.run(batch, version);
    if (!resolved.any_committed) return;
    if (!apply(batch, version, resolved.writes)) return;
    applied = true;
    commit_batches_.fetch_add(1, std::memory_order_relaxed);
    versions_.publish(version);
    watches_.after_apply(resolved.writes);
  }

  // Raises the MVCC floor and collects the checker's history and the store below it.
  void collect_garbage(Version now) {
    const Version floor = versions_.advance(now);
    if (floor < 0) return;
    checker_.set_floor(floor);
    store_->forget_before(floor);
  }

  // Applies the batch's writes; on failure every transaction of the batch gets the error.
  bool apply(std::vector<Writer*>& batch, Version version, const std::vector<StoreWrite>& writes) {
    try {
      store_->apply(version, writes);
      return true;
    } catch (const Error& e) {
      fail_all(batch, e);
    } catch (const std::exception& e) {
      fail_all(batch, Error(ErrorCode::kInternalError, std::string("store apply: ") + e.what()));
    }
    return false;
  }

  static void fail_all(std::vector<Writer*>& batch, const Error& error) {
    for (Writer* w : batch) {
      if (!w->error) w->error = error;
    }
  }

  const std::unique_ptr<VersionedStore> store_;
  ReadVersions versions_;
  WriteGroup group_;
  // Leader-only state (the write group orders the leaders).
  ConflictChecker checker_;
  BatchResolver resolver_;
  WatchRegistry watches_;
  Version last_version_;
  std::atomic<std::uint64_t> commit_batches_{0};
};

const StoreSnapshot& PipelineSession::snap() {
  if (!snapshot_) engine_->acquire(pin_, snapshot_);
  engine_->check_read(snapshot_->version());
  return *snapshot_;
}

// Without check_read: a read version alone reads nothing. A commit sends it to the resolver,
// which calls the transaction too old only if it has reads to check (as FoundationDB's).
Version PipelineSession::read_version() {
  if (!snapshot_) engine_->acquire(pin_, snapshot_);
  return snapshot_->version();
}

std::optional<std::string> PipelineSession::get(std::string_view key) { return snap().get(key); }

std::vector<KeyValue> PipelineSession::get_range(std::string_view begin, std::string_view end,
                                                 int limit, bool reverse) {
  return snap().get_range(begin, end, limit, reverse);
}

CommitResult PipelineSession::commit(CommitRequest request) {
  return engine_->commit(std::move(request));
}

}  // namespace

// The longest MVCC window in milliseconds (~24.8 days); in versions (microseconds) it must not
// overflow.
constexpr long long kMaxWindowMs = 2147483647;

PipelineOptions pipeline_options_from_query(std::map<std::string, std::string>& query) {
  PipelineOptions options;
  auto it = query.find("mvcc_window_ms");
  if (it != query.end()) {
    const std::string& text = it->second;
    long long ms = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
    if (ec != std::errc() || ptr != text.data() + text.size() || ms <= 0 || ms > kMaxWindowMs) {
      throw Error(ErrorCode::kConnectionStringInvalid,
                  "mvcc_window_ms must be an integer in [1, 2147483647], got '" + text + "'");
    }
    options.mvcc_window = std::chrono::milliseconds(ms);
    query.erase(it);
  }
  return options;
}

std::shared_ptr<engine::Engine> make_pipeline_engine(std::unique_ptr<VersionedStore> store,
                                                     PipelineOptions options) {
  if (!store) throw Error(ErrorCode::kInvalidOptionValue, "make_pipeline_engine: null store");
  if (options.mvcc_window.count() <= 0 || options.mvcc_window.count() > kMaxWindowMs) {
    throw Error(ErrorCode::kInvalidOptionValue, "mvcc_window must be in [1, 2147483647] ms");
  }
  if (options.max_batch_transactions < 1 || options.max_batch_transactions > 65535) {
    throw Error(ErrorCode::kInvalidOptionValue, "max_batch_transactions must be in [1, 65535]");
  }
  return std::make_shared<PipelineEngine>(std::move(store), options);
}

}  // namespace kvq::pipeline
