#include "engine/pipeline/commit_pipeline.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "engine/pipeline/conflict_checker.h"
#include "common/bytes.h"
#include "engine/watch_state.h"

namespace kvq::pipeline {
namespace {

using engine::CommitRequest;
using engine::CommitResult;
using engine::KeyRange;
using engine::Mutation;
using engine::MutationType;

// A read version in use: while a Pin is alive, its version is not garbage-collected (unless it
// falls out of the MVCC window).
struct Pin {
  explicit Pin(Version v) : version(v) {}
  Version version;
};

// The 10-byte versionstamp of position `order` in the batch committed at `version`.
std::string make_versionstamp(Version version, std::size_t order) {
  std::string stamp(10, '\0');
  auto v = static_cast<std::uint64_t>(version);
  for (int i = 0; i < 8; ++i) stamp[i] = static_cast<char>((v >> (8 * (7 - i))) & 0xff);
  stamp[8] = static_cast<char>((order >> 8) & 0xff);
  stamp[9] = static_cast<char>(order & 0xff);
  return stamp;
}

// The state of keys written earlier in the batch being resolved, so atomic ops see them.
class BatchOverlay {
 public:
  explicit BatchOverlay(const VersionedStore* store) : store_(store) {}

  void set(const std::string& key, std::optional<std::string> value) {
    points_[key] = std::move(value);
  }
  void clear_range(const std::string& begin, const std::string& end) {
    if (!(begin < end)) return;
    for (auto it = points_.lower_bound(begin); it != points_.end() && it->first < end; ++it) {
      it->second.reset();
    }
    cleared_.push_back({begin, end});
  }
  std::optional<std::string> get(const std::string& key) {
    auto it = points_.find(key);
    if (it != points_.end()) return it->second;
    for (const KeyRange& r : cleared_) {
      if (r.begin <= key && key < r.end) return std::nullopt;
    }
    if (!base_) base_ = store_->snapshot();
    return base_->get(key);
  }

 private:
  const VersionedStore* store_;
  std::shared_ptr<const StoreSnapshot> base_;
  std::map<std::string, std::optional<std::string>, std::less<>> points_;
  std::vector<KeyRange> cleared_;
};

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
        options_(options),
        window_(static_cast<Version>(options.mvcc_window.count()) * 1000),
        start_(std::chrono::steady_clock::now()),
        base_version_(store_->latest_version()),
        last_version_(base_version_) {
    current_pin_ = std::make_shared<Pin>(base_version_);
    pins_.push_back({base_version_, current_pin_});
    floor_.store(base_version_);
    last_version_published_.store(base_version_);
    checker_.set_floor(base_version_);
  }

  ~PipelineEngine() override {
    std::lock_guard<std::mutex> lock(watch_mu_);
    for (auto& [key, entry] : watches_) {
      entry.state->fail(Error(ErrorCode::kOperationCancelled, "the database was closed"));
    }
  }

  std::unique_ptr<engine::Session> begin() override {
    return std::make_unique<PipelineSession>(shared_from_this());
  }

  void watch(std::string key, std::optional<std::string> value_seen, Version /*version*/,
             std::shared_ptr<detail::WatchState> state) override {
    std::lock_guard<std::mutex> lock(watch_mu_);
    if (++registrations_ % 256 == 0) prune_watches();
    // Register first, then compare with the latest value. Every write of watch_count_ is a
    // read-modify-write, as is process()'s read of it after applying a batch, so the two are
    // totally ordered: either that commit's RMW comes later and sees watch_count_ > 0 (and checks
    // this entry under watch_mu_ once we are done), or ours comes later, synchronizes with it, and
    // the snapshot below includes its writes. Comparing first and registering after missed a
    // commit applied in between while no other watch was registered. (RMWs rather than fences:
    // ThreadSanitizer does not model fences.)
    auto it = watches_.emplace(std::move(key), WatchEntry{std::move(value_seen), state});
    watch_count_.exchange(watches_.size(), std::memory_order_acq_rel);
    std::optional<std::string> current;
    try {
      current = store_->snapshot()->get(it->first);
    } catch (const Error& e) {
      state->fail(e);
    }
    if (!state->ready() && current != it->second.value_seen) state->fire();
    if (state->ready()) {
      watches_.erase(it);
      watch_count_.exchange(watches_.size(), std::memory_order_acq_rel);
    }
  }

  std::uint64_t commit_batches() const override {
    return commit_batches_.load(std::memory_order_relaxed);
  }

  // --- used by sessions ---

  // The pin of the newest version and a snapshot at (or after) it.
  void acquire(std::shared_ptr<Pin>& pin, std::shared_ptr<const StoreSnapshot>& snapshot) {
    {
      std::lock_guard<std::mutex> lock(current_pin_mu_);
      pin = current_pin_;
    }
    snapshot = store_->snapshot();
  }

  // Throws transaction_too_old if `read_version` can no longer be read.
  void check_read(Version read_version) {
    if (read_version < floor_.load(std::memory_order_acquire)) throw too_old(read_version);
    if (read_version >= last_version_published_.load(std::memory_order_acquire)) return;
    Version now = now_version();
    if (now - read_version <= window_) return;
    // The read version is old; it is unusable once the version after it is older than the window.
    std::lock_guard<std::mutex> lock(pins_mu_);
    for (const PinRecord& r : pins_) {
      if (r.version > read_version) {
        if (r.version <= now - window_) throw too_old(read_version);
        return;
      }
    }
  }

  CommitResult commit(CommitRequest request) {
    PendingCommit pc;
    pc.request = &request;
    std::unique_lock<std::mutex> lock(queue_mu_);
    queue_.push_back(&pc);
    if (!leader_active_) {
      leader_active_ = true;
      pc.lead = true;
    }
    while (!pc.done && !pc.lead) pc.cv.wait(lock);
    if (!pc.done) lead(lock, pc);
    lock.unlock();
    if (pc.error) throw *pc.error;
    return std::move(pc.result);
  }

 private:
  struct PendingCommit {
    CommitRequest* request = nullptr;
    CommitResult result;
    std::optional<Error> error;
    bool done = false;
    bool lead = false;
    std::condition_variable cv;
  };
  struct PinRecord {
    Version version;
    std::weak_ptr<Pin> pin;
  };
  struct WatchEntry {
    std::optional<std::string> value_seen;
    std::shared_ptr<detail::WatchState> state;
  };

  static Error too_old(Version read_version) {
    return Error(ErrorCode::kTransactionTooOld,
                 "read version " + std::to_string(read_version) + " is older than the MVCC window");
  }

  Version now_version() const {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now() - start_)
                  .count();
    return base_version_ + 1 + static_cast<Version>(us);
  }

  // Runs batches (queue_mu_ held on entry and exit) until `own` is done, then hands the
  // leadership to the next waiter, if any.
  void lead(std::unique_lock<std::mutex>& lock, PendingCommit& own) {
    std::vector<PendingCommit*> batch;
    int batches_run = 0;
    while (!queue_.empty() && (!own.done || batches_run < 4)) {
      std::size_t n = std::min(queue_.size(), options_.max_batch_transactions);
      batch.assign(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
      lock.unlock();
      try {
        process(batch);
      } catch (const std::exception& e) {
        fail_unapplied(batch, e);
      }
      lock.lock();
      for (PendingCommit* p : batch) {
        p->done = true;
        if (p != &own) p->cv.notify_one();
      }
      ++batches_run;
    }
    if (!queue_.empty()) {
      PendingCommit* next = queue_.front();
      next->lead = true;
      next->cv.notify_one();
    } else {
      leader_active_ = false;
    }
  }

  // Raises the MVCC floor to max(oldest live pin, newest version superseded more than the window
  // ago) and collects garbage below it.
  void advance_floor(Version now) {
    Version floor;
    {
      std::lock_guard<std::mutex> lock(pins_mu_);
      const Version cut = now - window_;
      while (pins_.size() > 1 && (pins_[1].version <= cut || pins_[0].pin.expired())) {
        pins_.pop_front();
      }
      floor = pins_.front().version;
    }
    if (floor > floor_.load(std::memory_order_relaxed)) {
      floor_.store(floor, std::memory_order_release);
      checker_.set_floor(floor);
      store_->forget_before(floor);
    }
  }

  // process() threw (a store read while resolving ADDs, bad_alloc, ...). Unless the batch was
  // already applied, none of its transactions committed: each gets the error.
  void fail_unapplied(std::vector<PendingCommit*>& batch, const std::exception& e) {
    if (batch_applied_) return;
    const auto* kvq_error = dynamic_cast<const Error*>(&e);
    const Error error = kvq_error != nullptr
                            ? *kvq_error
                            : Error(ErrorCode::kInternalError,
                                    std::string("commit pipeline: ") + e.what());
    for (PendingCommit* p : batch) {
      if (!p->error) p->error = error;
    }
  }

  void process(std::vector<PendingCommit*>& batch) {
    batch_applied_ = false;
    const Version now = now_version();
    advance_floor(now);
    const Version version = std::max(last_version_ + 1, now);

    // Phase 0: versionstamps, and the write conflicts of versionstamped keys.
    std::vector<CheckerTransaction> input(batch.size());
    std::vector<std::string> stamps(batch.size());
    std::vector<bool> malformed(batch.size(), false);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      CommitRequest& req = *batch[i]->request;
      stamps[i] = make_versionstamp(version, i);
      for (const Mutation& m : req.mutations) {
        if (m.type == MutationType::kSetVersionstampedKey) {
          std::optional<std::string> key = common::splice_versionstamp(m.param1, stamps[i]);
          if (!key) {
            malformed[i] = true;
            break;
          }
          req.write_conflicts.push_back({*key, common::key_after(*key)});
        } else if (m.type == MutationType::kSetVersionstampedValue &&
                   !common::splice_versionstamp(m.param2, stamps[i])) {
          malformed[i] = true;
          break;
        }
      }
      if (!malformed[i]) {
        input[i] = {req.read_version, &req.read_conflicts, &req.write_conflicts};
      }
    }

    // Phases 1-4: the checker.
    std::vector<ConflictChecker::Outcome> outcomes = checker_.resolve(input, version);

    // Resolve the committed mutations into plain writes.
    BatchOverlay overlay(store_.get());
    std::vector<StoreWrite> writes;
    bool any_committed = false;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      PendingCommit& pc = *batch[i];
      if (malformed[i]) {
        pc.error = Error(ErrorCode::kClientInvalidOperation,
                         "versionstamp offset outside the key or value");
        continue;
      }
      if (outcomes[i] == ConflictChecker::Outcome::kTooOld) {
        pc.error = too_old(pc.request->read_version);
        continue;
      }
      if (outcomes[i] == ConflictChecker::Outcome::kConflict) {
        pc.error = Error(ErrorCode::kNotCommitted,
                         "a key read by the transaction was written by a concurrent commit");
        continue;
      }
      any_committed = true;
      for (Mutation& m : pc.request->mutations) {
        switch (m.type) {
          case MutationType::kSet:
            overlay.set(m.param1, m.param2);
            writes.push_back({StoreWrite::Kind::kSet, std::move(m.param1), std::move(m.param2)});
            break;
          case MutationType::kClear:
            overlay.set(m.param1, std::nullopt);
            writes.push_back({StoreWrite::Kind::kClear, std::move(m.param1), {}});
            break;
          case MutationType::kClearRange:
            overlay.clear_range(m.param1, m.param2);
            writes.push_back(
                {StoreWrite::Kind::kClearRange, std::move(m.param1), std::move(m.param2)});
            break;
          case MutationType::kAddValue: {
            std::string value = common::add_le(overlay.get(m.param1), m.param2);
            overlay.set(m.param1, value);
            writes.push_back({StoreWrite::Kind::kSet, std::move(m.param1), std::move(value)});
            break;
          }
          case MutationType::kSetVersionstampedKey: {
            std::string key = *common::splice_versionstamp(m.param1, stamps[i]);
            overlay.set(key, m.param2);
            writes.push_back({StoreWrite::Kind::kSet, std::move(key), std::move(m.param2)});
            break;
          }
          case MutationType::kSetVersionstampedValue: {
            std::string value = *common::splice_versionstamp(m.param2, stamps[i]);
            overlay.set(m.param1, value);
            writes.push_back({StoreWrite::Kind::kSet, std::move(m.param1), std::move(value)});
            break;
          }
        }
      }
      pc.result.version = version;
      pc.result.versionstamp = stamps[i];
    }
    if (!any_committed) return;

    last_version_ = version;
    std::optional<Error> apply_error;
    try {
      store_->apply(version, writes);
    } catch (const Error& e) {
      apply_error = e;
    } catch (const std::exception& e) {
      apply_error = Error(ErrorCode::kInternalError, std::string("store apply: ") + e.what());
    }
    if (apply_error) {
      // The checker recorded the writes anyway: that only makes later checks more conservative.
      for (std::size_t i = 0; i < batch.size(); ++i) {
        if (!batch[i]->error) batch[i]->error = *apply_error;
      }
      return;
    }
    batch_applied_ = true;
    commit_batches_.fetch_add(1, std::memory_order_relaxed);
    auto pin = std::make_shared<Pin>(version);
    {
      std::lock_guard<std::mutex> lock(pins_mu_);
      pins_.push_back({version, pin});
    }
    {
      std::lock_guard<std::mutex> lock(current_pin_mu_);
      current_pin_ = std::move(pin);
    }
    last_version_published_.store(version, std::memory_order_release);
    // An RMW, not a load: pairs with the RMWs in watch() (see there).
    if (watch_count_.fetch_add(0, std::memory_order_acq_rel) > 0) fire_watches(writes);
  }

  void fire_watches(const std::vector<StoreWrite>& writes) {
    std::lock_guard<std::mutex> lock(watch_mu_);
    if (watches_.empty()) return;
    std::shared_ptr<const StoreSnapshot> snap = store_->snapshot();
    auto check = [&](auto it) {
      if (it->second.state->ready()) return watches_.erase(it);
      std::optional<std::string> current;
      try {
        current = snap->get(it->first);
      } catch (const Error& e) {
        it->second.state->fail(e);
        return watches_.erase(it);
      }
      if (current != it->second.value_seen) {
        it->second.state->fire();
        return watches_.erase(it);
      }
      return std::next(it);
    };
    for (const StoreWrite& w : writes) {
      if (w.kind == StoreWrite::Kind::kClearRange) {
        for (auto it = watches_.lower_bound(w.key); it != watches_.end() && it->first < w.value;) {
          it = check(it);
        }
      } else {
        auto [lo, hi] = watches_.equal_range(w.key);
        for (auto it = lo; it != hi;) it = check(it);
      }
    }
    watch_count_.exchange(watches_.size(), std::memory_order_acq_rel);
  }

  void prune_watches() {
    for (auto it = watches_.begin(); it != watches_.end();) {
      it = it->second.state->ready() ? watches_.erase(it) : std::next(it);
    }
  }

  const std::unique_ptr<VersionedStore> store_;
  const PipelineOptions options_;
  const Version window_;  // the MVCC window in versions (microseconds)
  const std::chrono::steady_clock::time_point start_;
  const Version base_version_;

  // Commit queue (group commit).
  std::mutex queue_mu_;
  std::deque<PendingCommit*> queue_;
  bool leader_active_ = false;

  // Leader-only state (the leadership handoff under queue_mu_ orders accesses).
  ConflictChecker checker_;
  Version last_version_;
  bool batch_applied_ = false;  // the batch being processed reached the store

  std::atomic<Version> floor_{0};
  std::atomic<Version> last_version_published_{0};
  std::atomic<std::uint64_t> commit_batches_{0};

  std::mutex current_pin_mu_;
  std::shared_ptr<Pin> current_pin_;
  std::mutex pins_mu_;
  std::deque<PinRecord> pins_;  // one per applied version >= floor, in version order

  std::mutex watch_mu_;
  std::multimap<std::string, WatchEntry, std::less<>> watches_;
  std::atomic<std::size_t> watch_count_{0};
  std::uint64_t registrations_ = 0;
};

const StoreSnapshot& PipelineSession::snap() {
  if (!snapshot_) engine_->acquire(pin_, snapshot_);
  return *snapshot_;
}

Version PipelineSession::read_version() {
  const StoreSnapshot& s = snap();
  engine_->check_read(s.version());
  return s.version();
}

std::optional<std::string> PipelineSession::get(std::string_view key) {
  const StoreSnapshot& s = snap();
  engine_->check_read(s.version());
  return s.get(key);
}

std::vector<KeyValue> PipelineSession::get_range(std::string_view begin, std::string_view end,
                                                 int limit, bool reverse) {
  const StoreSnapshot& s = snap();
  engine_->check_read(s.version());
  return s.get_range(begin, end, limit, reverse);
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
