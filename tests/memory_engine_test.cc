// The in-memory MVCC store (src/engine/memory/memory_store.h) and the shared pipeline on top of it:
// versioned reads, garbage collection, and bounded memory under a long queue churn.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/memory/memory_store.h"
#include "engine/pipeline/commit_pipeline.h"
#include "kvq/database.h"

namespace kvq {
namespace {

using engine::MemoryStore;
using pipeline::StoreWrite;

StoreWrite set(std::string k, std::string v) {
  return {StoreWrite::Kind::kSet, std::move(k), std::move(v)};
}
StoreWrite clear(std::string k) { return {StoreWrite::Kind::kClear, std::move(k), {}}; }
StoreWrite clear_range(std::string b, std::string e) {
  return {StoreWrite::Kind::kClearRange, std::move(b), std::move(e)};
}

TEST(MemoryStore, SnapshotsReadTheirOwnVersion) {
  MemoryStore s;
  EXPECT_EQ(s.latest_version(), 0);
  s.apply(10, {set("a", "1"), set("b", "1")});
  auto v10 = s.snapshot();
  s.apply(20, {set("a", "2"), clear("b"), set("c", "2")});
  auto v20 = s.snapshot();
  EXPECT_EQ(v10->version(), 10);
  EXPECT_EQ(v10->get("a"), "1");
  EXPECT_EQ(v10->get("b"), "1");
  EXPECT_EQ(v10->get("c"), std::nullopt);
  EXPECT_EQ(v20->get("a"), "2");
  EXPECT_EQ(v20->get("b"), std::nullopt);
  EXPECT_EQ(v20->get_range("", "z", 0, false).size(), 2u);
  EXPECT_EQ(v10->get_range("", "z", 1, true), (std::vector<KeyValue>{{"b", "1"}}));
}

TEST(MemoryStore, ClearRangeHidesOnlyKeysInsideTheRange) {
  MemoryStore s;
  s.apply(1, {set("a", "1"), set("b", "1"), set("c", "1")});
  s.apply(2, {clear_range("a", "c"), set("b", "again")});
  auto snap = s.snapshot();
  EXPECT_EQ(snap->get_range("", "z", 0, false),
            (std::vector<KeyValue>{{"b", "again"}, {"c", "1"}}));
}

TEST(MemoryStore, VersionsMustIncrease) {
  MemoryStore s;
  s.apply(5, {});
  EXPECT_THROW(s.apply(5, {set("a", "1")}), Error);
}

TEST(MemoryStore, ForgetBeforeKeepsTheNewestVersionAtTheFloorAndRefusesOlderSnapshots) {
  MemoryStore s;
  s.apply(1, {set("a", "1"), set("gone", "x")});
  auto old = s.snapshot();
  s.apply(2, {set("a", "2"), clear("gone")});
  s.apply(3, {set("a", "3")});
  EXPECT_EQ(s.entry_count(), 5u);
  s.forget_before(2);
  EXPECT_EQ(s.entry_count(), 2u);  // a@2, a@3 ("gone" dropped with its tombstone)
  EXPECT_EQ(s.key_count(), 1u);
  auto at3 = s.snapshot();
  EXPECT_EQ(at3->get("a"), "3");
  try {
    old->get("a");
    FAIL() << "expected transaction_too_old";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTransactionTooOld);
  }
}

TEST(MemoryStore, KeySetAndClearedInOneBatchIsGarbageCollected) {
  MemoryStore s;
  s.apply(1, {set("a", "1"), clear("a"), set("b", "1"), clear_range("b", "c")});
  s.apply(2, {set("live", "1")});
  s.forget_before(2);
  EXPECT_EQ(s.snapshot()->get("a"), std::nullopt);
  EXPECT_EQ(s.key_count(), 1u) << "keys whose only entry is a tombstone must be dropped";
  EXPECT_EQ(s.entry_count(), 1u);
}

TEST(MemoryEngine, MemoryStaysBoundedUnderALongQueueChurn) {
  auto store = std::make_unique<MemoryStore>();
  MemoryStore* raw = store.get();
  Database db(pipeline::make_pipeline_engine(std::move(store), {}), "memory:");
  auto item = [](int i) { return "q/" + std::to_string(1000000 + i); };
  for (int i = 0; i < 10; ++i) db.run([&](Transaction& tr) { tr.set(item(i), "payload"); });
  for (int i = 10; i < 20000; ++i) {
    db.run([&](Transaction& tr) { tr.set(item(i), "payload"); });
    db.run([&](Transaction& tr) {  // pop the first item
      auto first = tr.get_range("q/", "q0", {.limit = 1});
      ASSERT_EQ(first.size(), 1u);
      tr.clear(first[0].key);
    });
  }
  EXPECT_EQ(db.run([](Transaction& tr) { return tr.get_range("q/", "q0"); }).size(), 10u);
  EXPECT_LT(raw->key_count(), 50u) << "deleted items must be garbage-collected";
  EXPECT_LT(raw->entry_count(), 50u);
}

TEST(MemoryEngine, PopsDoNotWalkTheTombstonesAnOldReaderKeeps) {
  // An open transaction holds the floor, so every popped item stays as a tombstone; each pop's
  // read of the front must jump over them (dead stretches), not step over all of them again.
  auto store = std::make_unique<MemoryStore>();
  MemoryStore* raw = store.get();
  Database db(pipeline::make_pipeline_engine(std::move(store), {}), "memory:");
  auto item = [](int i) { return "q/" + std::to_string(1000000 + i); };
  constexpr int kItems = 5000;
  db.run([&](Transaction& tr) {
    for (int i = 0; i < kItems; ++i) tr.set(item(i), "payload");
  });
  Transaction reader = db.create_transaction();
  EXPECT_EQ(reader.get(item(0)), "payload");
  for (int i = 0; i < kItems; ++i) {
    db.run([&](Transaction& tr) {
      auto first = tr.get_range("q/", "q0", {.limit = 1});
      ASSERT_EQ(first.size(), 1u);
      ASSERT_EQ(first[0].key, item(i));
      tr.clear(first[0].key);
    });
  }
  EXPECT_EQ(reader.get(item(0)), "payload") << "the reader still pins the floor";
  EXPECT_GT(raw->entry_count(), static_cast<std::size_t>(kItems));
  // Stepping over every tombstone each time would be kItems^2 / 2 = 12.5 million steps.
  EXPECT_LT(raw->dead_keys_stepped(), 20u * kItems);
}

TEST(MemoryEngine, AnOpenTransactionPinsItsVersionUntilReleased) {
  auto store = std::make_unique<MemoryStore>();
  MemoryStore* raw = store.get();
  Database db(pipeline::make_pipeline_engine(std::move(store), {}), "memory:");
  db.run([](Transaction& tr) { tr.set("k", "0"); });
  Transaction reader = db.create_transaction();
  EXPECT_EQ(reader.get("k"), "0");
  for (int i = 1; i <= 100; ++i) {
    db.run([&](Transaction& tr) { tr.set("k", std::to_string(i)); });
  }
  EXPECT_EQ(reader.get("k"), "0") << "the pinned version is still readable";
  EXPECT_GT(raw->entry_count(), 100u);
  reader.reset();
  db.run([](Transaction& tr) { tr.set("k", "last"); });
  EXPECT_LE(raw->entry_count(), 2u);
}

TEST(MemoryEngine, ACommittedOrFailedTransactionKeptByItsCallerPinsNothing) {
  auto store = std::make_unique<MemoryStore>();
  MemoryStore* raw = store.get();
  Database db(pipeline::make_pipeline_engine(std::move(store), {}), "memory:");
  db.run([](Transaction& tr) { tr.set("k", "0"); });
  Transaction committed = db.create_transaction();
  EXPECT_EQ(committed.get("k"), "0");
  committed.set("other", "x");
  committed.commit();
  Transaction read_only = db.create_transaction();
  EXPECT_EQ(read_only.get("k"), "0");
  read_only.commit();
  Transaction failed = db.create_transaction();
  EXPECT_EQ(failed.get("k"), "0");
  db.run([](Transaction& tr) { tr.set("k", "1"); });
  failed.set("k", "mine");
  EXPECT_THROW(failed.commit(), Error);  // not_committed: it read "k"
  for (int i = 2; i <= 100; ++i) {
    db.run([&](Transaction& tr) { tr.set("k", std::to_string(i)); });
  }
  EXPECT_LE(raw->entry_count(), 3u) << "a kept transaction must not hold the floor down";
  committed.reset();  // and each can still be reused
  EXPECT_EQ(committed.get("k"), "100");
}

// A real MemoryStore whose apply() waits at a gate, so commits pile up behind a batch in flight.
class GatedStore final : public pipeline::VersionedStore {
 public:
  Version latest_version() const override { return inner_.latest_version(); }
  std::shared_ptr<const pipeline::StoreSnapshot> snapshot() const override {
    ++snapshots_;
    return inner_.snapshot();
  }
  void apply(Version version, const std::vector<pipeline::StoreWrite>& writes) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++applies_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return open_; });
    }
    inner_.apply(version, writes);
  }
  void forget_before(Version version) override { inner_.forget_before(version); }
  void wait_for_first_apply() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return applies_ > 0; });
  }
  void open_gate() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  int snapshots() const { return snapshots_.load(); }

 private:
  mutable std::atomic<int> snapshots_{0};
  MemoryStore inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  int applies_ = 0;
  bool open_ = false;
};

TEST(Pipeline, CommitsArrivingDuringABatchAreGroupedIntoTheNextBatch) {
  auto store = std::make_unique<GatedStore>();
  GatedStore* gate = store.get();
  Database db(pipeline::make_pipeline_engine(std::move(store), {}), "gated");
  std::thread first([&] { db.run([](Transaction& tr) { tr.set("first", "1"); }); });
  gate->wait_for_first_apply();  // batch 1 is in flight and blocked
  const int kWaiting = 7;
  std::vector<std::thread> others;
  std::vector<std::string> stamps(kWaiting);
  for (int i = 0; i < kWaiting; ++i) {
    others.emplace_back([&, i] {
      Transaction tr = db.create_transaction();
      tr.set("k" + std::to_string(i), "v");
      tr.set_versionstamped_value("vs" + std::to_string(i),
                                  std::string(10, '\0') + std::string(4, '\0'));
      tr.commit();
      stamps[i] = tr.get_versionstamp();
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let them queue up
  gate->open_gate();
  first.join();
  for (auto& t : others) t.join();
  DatabaseStats stats = db.stats();
  EXPECT_EQ(stats.commits, 1u + kWaiting);
  EXPECT_LT(stats.commit_batches, stats.commits) << "queued commits share batches";
  EXPECT_EQ(db.run([](Transaction& tr) { return tr.get_range("", "\xff"); }).size(),
            1u + 2 * kWaiting);
  // Transactions of one batch share the version (first 8 bytes) and differ in the order bytes.
  std::set<std::string> unique(stamps.begin(), stamps.end());
  EXPECT_EQ(unique.size(), static_cast<std::size_t>(kWaiting));
  std::set<std::string> versions;
  for (const std::string& s : stamps) versions.insert(s.substr(0, 8));
  EXPECT_LT(versions.size(), static_cast<std::size_t>(kWaiting));
  for (int i = 0; i < kWaiting; ++i) {
    EXPECT_EQ(db.run([&](Transaction& tr) { return tr.get("vs" + std::to_string(i)); }), stamps[i]);
  }
}

TEST(Pipeline, ExplicitReadConflictWithoutReadsIsCheckedFromAReadVersionTakenAtCommit) {
  // FoundationDB takes a read version at commit for a transaction that never read, so its
  // add_read_conflict_range conflicts with writes committed after that point.
  auto store = std::make_unique<GatedStore>();
  GatedStore* gate = store.get();
  Database db(pipeline::make_pipeline_engine(std::move(store), {}), "gated");
  std::thread writer([&] { db.run([](Transaction& tr) { tr.set("k", "1"); }); });
  gate->wait_for_first_apply();  // the write of k is in flight, not yet applied
  Transaction tr = db.create_transaction();
  tr.add_read_conflict_key("k");
  tr.set("x", "1");
  const int snapshots_before = gate->snapshots();
  ErrorCode code = ErrorCode::kUnknownError;  // "committed"
  std::thread committer([&] {
    try {
      tr.commit();
    } catch (const Error& e) {
      code = e.code();
    }
  });
  // Open the gate once the commit took its read version (or after 2 s if it takes none).
  for (int i = 0; i < 200 && gate->snapshots() == snapshots_before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  gate->open_gate();
  writer.join();
  committer.join();
  EXPECT_EQ(code, ErrorCode::kNotCommitted);
}

// A real MemoryStore that fails apply() with io_error while told to.
class FailingStore final : public pipeline::VersionedStore {
 public:
  Version latest_version() const override { return inner_.latest_version(); }
  std::shared_ptr<const pipeline::StoreSnapshot> snapshot() const override {
    return inner_.snapshot();
  }
  void apply(Version version, const std::vector<pipeline::StoreWrite>& writes) override {
    if (fail_.load()) throw Error(ErrorCode::kIoError, "injected: disk full");
    inner_.apply(version, writes);
  }
  void forget_before(Version version) override { inner_.forget_before(version); }
  std::atomic<bool> fail_{false};

 private:
  MemoryStore inner_;
};

TEST(Pipeline, StoreApplyErrorFailsTheBatchAndAppliesNothing) {
  auto store = std::make_unique<FailingStore>();
  FailingStore* raw = store.get();
  Database db(pipeline::make_pipeline_engine(std::move(store), {}), "failing");
  db.run([](Transaction& tr) { tr.set("a", "1"); });
  raw->fail_ = true;
  Transaction tr = db.create_transaction();
  tr.set("a", "2");
  try {
    tr.commit();
    FAIL() << "expected io_error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIoError);
    EXPECT_FALSE(e.retryable());
  }
  raw->fail_ = false;
  EXPECT_EQ(db.run([](Transaction& t) { return t.get("a"); }), "1");
  db.run([](Transaction& t) { t.set("a", "3"); });
  EXPECT_EQ(db.run([](Transaction& t) { return t.get("a"); }), "3");
}

// A real MemoryStore whose snapshot reads fail with io_error while told to.
class FailingReadStore final : public pipeline::VersionedStore {
 public:
  Version latest_version() const override { return inner_.latest_version(); }
  std::shared_ptr<const pipeline::StoreSnapshot> snapshot() const override {
    return std::make_shared<Snapshot>(inner_.snapshot(), &fail_);
  }
  void apply(Version version, const std::vector<pipeline::StoreWrite>& writes) override {
    inner_.apply(version, writes);
  }
  void forget_before(Version version) override { inner_.forget_before(version); }
  std::atomic<bool> fail_{false};

 private:
  class Snapshot final : public pipeline::StoreSnapshot {
   public:
    Snapshot(std::shared_ptr<const pipeline::StoreSnapshot> inner, const std::atomic<bool>* fail)
        : inner_(std::move(inner)), fail_(fail) {}
    Version version() const override { return inner_->version(); }
    std::optional<std::string> get(std::string_view key) const override {
      if (fail_->load()) throw Error(ErrorCode::kIoError, "injected: read error");
      return inner_->get(key);
    }
    std::vector<KeyValue> get_range(std::string_view begin, std::string_view end, int limit,
                                    bool reverse) const override {
      if (fail_->load()) throw Error(ErrorCode::kIoError, "injected: read error");
      return inner_->get_range(begin, end, limit, reverse);
    }

   private:
    std::shared_ptr<const pipeline::StoreSnapshot> inner_;
    const std::atomic<bool>* fail_;
  };
  MemoryStore inner_;
};

TEST(Pipeline, StoreReadErrorWhileResolvingABatchFailsItAndLaterCommitsStillRun) {
  auto store = std::make_unique<FailingReadStore>();
  FailingReadStore* raw = store.get();
  auto db =
      std::make_shared<Database>(pipeline::make_pipeline_engine(std::move(store), {}), "failing");
  db->run([](Transaction& tr) { tr.set("a", "1"); });
  raw->fail_ = true;
  Transaction tr = db->create_transaction();
  tr.atomic_add("n", std::int64_t{1});  // resolving the ADD reads the store
  tr.set("a", "2");
  try {
    tr.commit();
    FAIL() << "expected io_error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIoError);
  }
  raw->fail_ = false;
  // The pipeline must still accept commits (a thread, so a stuck pipeline fails instead of
  // hanging).
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> f = done->get_future();
  std::thread([db, done] {
    db->run([](Transaction& t) { t.set("a", "3"); });
    done->set_value();
  }).detach();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "the commit pipeline is stuck after a failed batch";
  EXPECT_EQ(db->run([](Transaction& t) { return t.get("a"); }), "3");
  EXPECT_EQ(db->run([](Transaction& t) { return t.get("n"); }), std::nullopt);
}

// A real MemoryStore whose next snapshot(), once armed, is held at a gate, after taking the
// snapshot (default) or before.
class PausingSnapshotStore final : public pipeline::VersionedStore {
 public:
  explicit PausingSnapshotStore(bool pause_before_taking = false)
      : pause_before_taking_(pause_before_taking) {}
  Version latest_version() const override { return inner_.latest_version(); }
  std::shared_ptr<const pipeline::StoreSnapshot> snapshot() const override {
    std::shared_ptr<const pipeline::StoreSnapshot> snap;
    if (!pause_before_taking_) snap = inner_.snapshot();
    if (armed_.exchange(false)) {
      std::unique_lock<std::mutex> lock(mu_);
      paused_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return released_; });
    }
    if (pause_before_taking_) snap = inner_.snapshot();
    return snap;
  }
  void apply(Version version, const std::vector<pipeline::StoreWrite>& writes) override {
    inner_.apply(version, writes);
  }
  void forget_before(Version version) override { inner_.forget_before(version); }
  void arm() { armed_ = true; }
  void wait_paused() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return paused_; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  const bool pause_before_taking_;
  MemoryStore inner_;
  mutable std::atomic<bool> armed_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable bool paused_ = false;
  bool released_ = false;
};

TEST(Pipeline, WatchRegisteredWhileAWriteCommitsIsNotMissed) {
  auto store = std::make_unique<PausingSnapshotStore>();
  PausingSnapshotStore* raw = store.get();
  Database db(pipeline::make_pipeline_engine(std::move(store), {}), "pausing");
  db.run([](Transaction& tr) { tr.set("k", "0"); });
  Transaction tr = db.create_transaction();
  ASSERT_EQ(tr.get("k"), "0");
  Watch w = tr.watch("k");
  raw->arm();  // the watch registration's snapshot (taken before the write below) is held
  std::thread watcher([&] { tr.commit(); });
  raw->wait_paused();
  std::thread writer([&] { db.run([](Transaction& t) { t.set("k", "1"); }); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the write commits meanwhile
  raw->release();
  watcher.join();
  writer.join();
  EXPECT_TRUE(w.wait_for(std::chrono::seconds(5))) << "the change to k was missed";
}

TEST(Pipeline, WatchOnAVersionstampedValueSeesAChangeRightAfterTheCommit) {
  auto store = std::make_unique<PausingSnapshotStore>(/*pause_before_taking=*/true);
  PausingSnapshotStore* raw = store.get();
  Database db(pipeline::make_pipeline_engine(std::move(store), {}), "pausing");
  Transaction tr = db.create_transaction();
  tr.set_versionstamped_value("k", std::string(10, '\0') + std::string(4, '\0'));
  Watch w = tr.watch("k");
  raw->arm();  // the first snapshot after the commit (watch registration) is held
  std::thread committer([&] { tr.commit(); });
  raw->wait_paused();
  std::thread writer([&] { db.run([](Transaction& t) { t.set("k", "other"); }); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the write commits meanwhile
  raw->release();
  committer.join();
  writer.join();
  EXPECT_TRUE(w.wait_for(std::chrono::seconds(5)))
      << "the change from the stamped value to 'other' was missed";
}

TEST(Pipeline, ClosingTheDatabaseFailsPendingWatches) {
  Watch w;
  {
    auto db = open("memory:");
    Transaction tr = db->create_transaction();
    w = tr.watch("k");
    tr.commit();
  }
  try {
    w.wait_for(std::chrono::seconds(5));
    FAIL() << "expected operation_cancelled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOperationCancelled);
  }
}

TEST(Pipeline, RejectsBadOptions) {
  EXPECT_THROW(pipeline::make_pipeline_engine(std::make_unique<MemoryStore>(),
                                              {.mvcc_window = std::chrono::milliseconds(0)}),
               Error);
  EXPECT_THROW(pipeline::make_pipeline_engine(std::make_unique<MemoryStore>(),
                                              {.max_batch_transactions = 0}),
               Error);
  EXPECT_THROW(pipeline::make_pipeline_engine(nullptr, {}), Error);
  EXPECT_THROW(pipeline::make_pipeline_engine(std::make_unique<MemoryStore>(),
                                              {.mvcc_window = std::chrono::milliseconds::max()}),
               Error);
}

TEST(Pipeline, VersionsAdvanceAboutAMillionPerSecond) {
  Database db(pipeline::make_pipeline_engine(std::make_unique<MemoryStore>(), {}), "memory:");
  Transaction t1 = db.create_transaction();
  t1.set("a", "1");
  t1.commit();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  Transaction t2 = db.create_transaction();
  t2.set("a", "2");
  t2.commit();
  EXPECT_GE(t2.get_committed_version() - t1.get_committed_version(), 50'000);
}

}  // namespace
}  // namespace kvq
