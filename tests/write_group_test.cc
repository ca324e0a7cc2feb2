// The pipeline's group commit (src/engine/pipeline/write_group.h) on its own: every commit runs in
// exactly one batch and gets its own result; batches never overlap and run in queue order; a
// leader runs the batches queued behind it, up to its turn's limit, then hands the lead on, at
// once if the next writer is still spinning.
#include "engine/pipeline/write_group.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kvq::pipeline {
namespace {

// Runs batches, numbering the commits in the order the batches ran them (as a commit version) and
// recording which thread ran each batch; fails the test if two batches overlap.
class Recorder {
 public:
  void run(std::vector<Writer*>& batch) {
    if (running_.exchange(true)) overlaps_.fetch_add(1);
    {
      std::lock_guard lock(mu_);
      runners_.push_back(std::this_thread::get_id());
      sizes_.push_back(batch.size());
    }
    for (Writer* w : batch) w->result.version = next_++;
    running_.store(false);
  }

  int overlaps() const { return overlaps_.load(); }
  std::vector<std::thread::id> runners() {
    std::lock_guard lock(mu_);
    return runners_;
  }
  std::vector<std::size_t> sizes() {
    std::lock_guard lock(mu_);
    return sizes_;
  }

 private:
  std::atomic<bool> running_{false};
  std::atomic<int> overlaps_{0};
  Version next_ = 0;  // only touched by one batch at a time
  std::mutex mu_;
  std::vector<std::thread::id> runners_;
  std::vector<std::size_t> sizes_;
};

// A first commit whose batch is held running (its thread leading) until release(), so that the
// commits a test makes meanwhile queue behind it; every batch is recorded in `rec`.
class HeldLeader {
 public:
  HeldLeader(WriteGroup& group, Recorder& rec) : group_(group), rec_(rec) {
    thread_ = std::thread([this] {
      id_ = std::this_thread::get_id();
      group_.commit(first_, run());
    });
    while (rec_.runners().empty()) std::this_thread::yield();
  }
  ~HeldLeader() {
    if (thread_.joinable()) release_and_join();
  }

  // The batch function of every commit of the test: records the batch, and holds the first.
  WriteGroup::RunBatch run() {
    return [this](std::vector<Writer*>& batch) {
      rec_.run(batch);
      if (rec_.runners().size() == 1) {
        while (!release_.load()) std::this_thread::yield();
      }
    };
  }
  // Lets the first batch end, and waits for the leader's commit to return.
  void release_and_join() {
    release_ = true;
    thread_.join();
  }
  // After release_and_join(): the leader's thread, and its commit.
  std::thread::id id() const { return id_; }
  const Writer& first() const { return first_; }

 private:
  WriteGroup& group_;
  Recorder& rec_;
  engine::CommitRequest first_request_;
  Writer first_{&first_request_};
  std::atomic<bool> release_{false};
  std::thread::id id_;
  std::thread thread_;
};

TEST(WriteGroup, ManyThreadsGetEveryCommitRunOnceInNonOverlappingBatches) {
  WriteGroup group(/*max_batch=*/16, /*batches_per_leader=*/4);
  Recorder rec;
  constexpr int kThreads = 16, kCommits = 2000;
  std::vector<std::vector<Version>> versions(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCommits; ++i) {
        engine::CommitRequest request;
        Writer w(&request);
        group.commit(w, [&](std::vector<Writer*>& batch) { rec.run(batch); });
        versions[static_cast<std::size_t>(t)].push_back(w.result.version);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<Version> all;
  for (const auto& v : versions) {
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));  // a thread's commits run in its order
    all.insert(all.end(), v.begin(), v.end());
  }
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), static_cast<std::size_t>(kThreads * kCommits));
  for (std::size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], static_cast<Version>(i));
  EXPECT_EQ(rec.overlaps(), 0);
  for (std::size_t n : rec.sizes()) EXPECT_LE(n, 16u);
}

TEST(WriteGroup, ALeaderRunsTheBatchesQueuedBehindItUpToItsTurnsLimit) {
  // No yield budget: the followers that spin go to sleep at once, so the leader finds them asleep.
  WriteGroup group(/*max_batch=*/2, /*batches_per_leader=*/3, std::chrono::seconds(60),
                   /*yield_budget=*/std::chrono::microseconds(0));
  Recorder rec;
  HeldLeader held(group, rec);
  const WriteGroup::RunBatch run = held.run();
  constexpr int kQueued = 7;
  std::vector<engine::CommitRequest> requests(kQueued);
  std::vector<std::unique_ptr<Writer>> writers;
  for (auto& r : requests) writers.push_back(std::make_unique<Writer>(&r));
  std::vector<std::thread> followers;
  for (int i = 0; i < kQueued; ++i) {
    Writer* w = writers[static_cast<std::size_t>(i)].get();
    followers.emplace_back([&, w] { group.commit(*w, run); });
    while (group.queued() < static_cast<std::size_t>(i) + 1) std::this_thread::yield();  // in order
  }
  while (group.sleeps() < static_cast<std::uint64_t>(kQueued)) std::this_thread::yield();
  held.release_and_join();
  for (auto& t : followers) t.join();
  const std::thread::id leader = held.id();
  // Batches: [first], [0 1], [2 3] by the leader (its turn of 3), then [4 5], [6] by 4's thread.
  const std::vector<std::thread::id> runners = rec.runners();
  ASSERT_EQ(runners.size(), 5u);
  for (std::size_t b = 0; b < 3; ++b) EXPECT_EQ(runners[b], leader) << b;
  EXPECT_NE(runners[3], leader);
  EXPECT_EQ(runners[4], runners[3]);
  EXPECT_EQ(held.first().result.version, 0);
  for (int i = 0; i < kQueued; ++i) {
    EXPECT_EQ(writers[static_cast<std::size_t>(i)]->result.version, i + 1) << i;  // queue order
  }
  EXPECT_EQ(rec.overlaps(), 0);
}

TEST(WriteGroup, ALeaderHandsTheLeadAtOnceToAWriterStillSpinning) {
  // The follower yields its core until it is served (a minute at most), so it still spins when the
  // leader finishes; the leader would otherwise run its batch (a turn of 8 and a minute).
  WriteGroup group(/*max_batch=*/4, /*batches_per_leader=*/8, std::chrono::seconds(60),
                   /*yield_budget=*/std::chrono::seconds(60));
  Recorder rec;
  HeldLeader held(group, rec);
  engine::CommitRequest second_request;
  Writer second(&second_request);
  std::thread::id follower;
  std::thread follower_thread([&] {
    follower = std::this_thread::get_id();
    group.commit(second, held.run());
  });
  while (group.queued() < 1) std::this_thread::yield();
  held.release_and_join();
  follower_thread.join();
  const std::vector<std::thread::id> runners = rec.runners();
  ASSERT_EQ(runners.size(), 2u);
  EXPECT_EQ(runners[0], held.id());
  EXPECT_EQ(runners[1], follower);  // its own batch, on its own thread
  EXPECT_EQ(held.first().result.version, 0);
  EXPECT_EQ(second.result.version, 1);
  EXPECT_EQ(group.sleeps(), 0u);
  EXPECT_EQ(rec.overlaps(), 0);
}

}  // namespace
}  // namespace kvq::pipeline
