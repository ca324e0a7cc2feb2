// A client keeps pushing (one push every 100 ms) while the etcd member it talks to is SIGKILLed
// and restarted on the same port: the client must resume within 5 s of the restart (tracker
// issue 16: gRPC channels used to stay broken for good), a watch armed after the restart must
// fire, and the queue's history must be whole: every acknowledged push popped exactly once, in
// push order. Pushes carry receipts (an identity chosen outside the retry loop), so the retries
// that a dead member forces never push twice.
#ifdef KVQ_WITH_ETCD
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kvq/kvq.h"
#include "support/etcd_cluster.h"
#include "support/figures.h"

namespace kvq {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Pushes "0", "1", ... onto one Queue every 100 ms from its own thread, each exactly once however
// often an attempt fails, and records when each push was acknowledged.
class Pusher {
 public:
  explicit Pusher(std::shared_ptr<Database> db)
      : db_(std::move(db)),
        queue_(db_, Subspace(Tuple().append("rc").append("q"))),
        receipts_(Tuple().append("rc").append("r")),
        thread_([this] { run(); }) {}
  ~Pusher() { stop(); }

  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // Number of acknowledged pushes.
  int acked() const { return acked_.load(); }
  // Time of the first acknowledgement at or after `t`; nullopt if none yet.
  std::optional<Clock::time_point> first_ack_after(Clock::time_point t) const {
    std::lock_guard lock(mu_);
    for (const Clock::time_point& at : ack_times_) {
      if (at >= t) return at;
    }
    return std::nullopt;
  }
  Queue& queue() { return queue_; }

 private:
  void run() {
    for (int n = 0; !stop_; ++n) {
      push_once(std::to_string(n));
      {
        std::lock_guard lock(mu_);
        ack_times_.push_back(Clock::now());
      }
      acked_++;
      std::this_thread::sleep_for(100ms);
    }
  }

  void push_once(const std::string& value) {
    const std::string receipt = receipts_.pack(Tuple().append(value));
    for (;;) {
      try {
        db_->run([&](Transaction& tr) {
          if (tr.get(receipt)) return;  // an earlier attempt committed
          queue_.push(tr, value);
          tr.set(receipt, "");
        });
        return;
      } catch (const Error&) {
        std::this_thread::sleep_for(100ms);  // connection_failed: same identity again
      }
    }
  }

  std::shared_ptr<Database> db_;
  Queue queue_;
  Subspace receipts_;
  std::atomic<bool> stop_{false};
  std::atomic<int> acked_{0};
  mutable std::mutex mu_;
  std::vector<Clock::time_point> ack_times_;
  std::thread thread_;
};

// Kills member `member`, restarts it 2 s later and returns how long after the restart (the
// member answering a new client) the pusher's next push was acknowledged.
Clock::duration outage(testing::EtcdCluster& cluster, int member, const Pusher& pusher) {
  cluster.kill(member);
  testing::record_figure(testing::kEtcdMemberKills, 1);
  std::this_thread::sleep_for(2s);
  cluster.restart(member);
  const Clock::time_point restarted = Clock::now();
  while (Clock::now() - restarted < 20s) {
    if (auto at = pusher.first_ack_after(restarted)) return *at - restarted;
    std::this_thread::sleep_for(20ms);
  }
  return 20s;
}

// A watch armed now on a fresh key fires once another transaction changes it.
void expect_new_watch_fires(const std::shared_ptr<Database>& db, const std::string& key) {
  Watch w = db->run([&](Transaction& tr) { return tr.watch(key); });
  db->run([&](Transaction& tr) { tr.set(key, "changed"); });
  EXPECT_TRUE(w.wait_for(5s)) << "a watch armed after the restart did not fire";
}

// Pops everything: exactly "0", "1", ..., in order, at least `acked` of them.
void expect_whole_history(Queue& queue, int acked) {
  int next = 0;
  while (std::optional<std::string> v = queue.pop()) {
    ASSERT_EQ(*v, std::to_string(next)) << "lost, duplicated or reordered push";
    ++next;
  }
  EXPECT_GE(next, acked) << "acknowledged pushes missing";
}

TEST(EtcdReconnect, SingleMemberKilledAndRestartedTwiceClientResumesWithinFiveSeconds) {
  if (!testing::EtcdCluster::available()) GTEST_SKIP() << "etcd not installed";
  testing::EtcdCluster cluster(1);
  auto db = open(cluster.url("prefix=rc1/&timeout_ms=1000&failover_ms=2000"));
  Pusher pusher(db);
  std::this_thread::sleep_for(1s);
  for (int round = 0; round < 2; ++round) {
    const Clock::duration resumed = outage(cluster, 0, pusher);
    std::printf("round %d: resumed %lld ms after the restart\n", round,
                static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(resumed).count()));
    EXPECT_LE(resumed, 5s) << "round " << round;
    expect_new_watch_fires(db, "w" + std::to_string(round));
  }
  pusher.stop();
  expect_whole_history(pusher.queue(), pusher.acked());
}

// A commit none of whose attempts could connect to any member (all refuse connections until the
// failover budget runs out) certainly never left the client: connection_failed, final, as a read
// gets. It was commit_unknown_result, retryable, so a blind write's retry loop never ended (found
// in review in session 23).
TEST(EtcdReconnect, ACommitThatReachedNoMemberIsConnectionFailedNotUnknown) {
  if (!testing::EtcdCluster::available()) GTEST_SKIP() << "etcd not installed";
  testing::EtcdCluster cluster(1);
  auto db = open(cluster.url("prefix=rc2/&timeout_ms=500&failover_ms=1000"));
  db->run([](Transaction& tr) { tr.set("k", "before"); });
  cluster.kill(0);
  const Clock::time_point start = Clock::now();
  try {
    TransactionOptions bounded;  // before, the retries ended only here (transaction_timed_out)
    bounded.timeout = 8s;
    db->run([](Transaction& tr) { tr.set("k", "after"); }, bounded);  // a blind write: no read
    ADD_FAILURE() << "the commit succeeded with its only member down";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kConnectionFailed) << e.what();
  }
  EXPECT_LT(Clock::now() - start, 10s);
  cluster.restart(0);
}

TEST(EtcdReconnect, KilledAndRestartedMemberOfThreeIsTheClientsOnlyEndpointAndComesBack) {
  if (!testing::EtcdCluster::available()) GTEST_SKIP() << "etcd not installed";
  testing::EtcdCluster cluster(3);
  const int member = cluster.leader();
  ASSERT_GE(member, 0);
  // The client knows only this member, so it cannot fail over: it must reconnect.
  auto db =
      open("etcd://" + cluster.endpoint(member) + "?prefix=rc3/&timeout_ms=1000&failover_ms=2000");
  Pusher pusher(db);
  std::this_thread::sleep_for(1s);
  const Clock::duration resumed = outage(cluster, member, pusher);
  std::printf("resumed %lld ms after the restart\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(resumed).count()));
  EXPECT_LE(resumed, 5s);
  expect_new_watch_fires(db, "w");
  pusher.stop();
  expect_whole_history(pusher.queue(), pusher.acked());
}

// A watch whose stream the restart broke is opened again from the revision it started at, so it
// fires on a change after the restart (and on one made while its member was down: the events are
// sent again). It failed with connection_failed before, and a waiting pop with it (found by
// review in session 31).
TEST(EtcdReconnect, AWatchArmedBeforeARestartFiresOnAChangeAfterIt) {
  if (!testing::EtcdCluster::available()) GTEST_SKIP() << "etcd not installed";
  testing::EtcdCluster cluster(1);
  auto db = open(cluster.url("prefix=rc4/&timeout_ms=1000&failover_ms=5000"));
  db->run([](Transaction& tr) { tr.set("k", "before"); });
  Watch w = db->run([](Transaction& tr) { return tr.watch("k"); });
  std::this_thread::sleep_for(1s);  // its stream is open
  cluster.kill(0);
  testing::record_figure(testing::kEtcdMemberKills, 1);
  std::this_thread::sleep_for(1s);
  cluster.restart(0);
  EXPECT_FALSE(w.wait_for(500ms)) << "fired with nothing changed";
  db->run([](Transaction& tr) { tr.set("k", "after"); });
  EXPECT_TRUE(w.wait_for(10s)) << "the watch did not fire after the restart";
}

TEST(EtcdReconnect, APopWaitingAcrossARestartGetsTheItemPushedAfterIt) {
  if (!testing::EtcdCluster::available()) GTEST_SKIP() << "etcd not installed";
  testing::EtcdCluster cluster(1);
  auto db = open(cluster.url("prefix=rc5/&timeout_ms=1000&failover_ms=5000"));
  Queue queue(db, Subspace(Tuple().append("q")));
  std::optional<std::string> got;
  std::string error;
  std::thread waiter([&] {
    try {
      got = queue.pop_wait(60s);
    } catch (const Error& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(1s);  // the pop is asleep on its watches
  cluster.kill(0);
  testing::record_figure(testing::kEtcdMemberKills, 1);
  std::this_thread::sleep_for(1s);
  cluster.restart(0);
  queue.push("after");
  waiter.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(got, "after");
}

}  // namespace
}  // namespace kvq
#endif  // KVQ_WITH_ETCD
