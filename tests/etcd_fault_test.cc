// A 3-member etcd cluster loses a follower and then its leader (SIGKILL) while clients push and
// pop on one PriorityQueue; the members are restarted; then the new leader is paused (SIGSTOP:
// its sockets stay open but it answers nothing, so calls to it time out) for 8 s and resumed.
// Every acknowledged push must end up popped or still queued, and nothing may be popped twice.
// Lease workers run beside the poppers: each takes an item (take_min, a 2 s lease) and, in one
// transaction, acks it and adds 1 to the item's effect counter (exactly-once processing: the
// store's fence makes a retried ack after commit_unknown_result throw lease_lost instead of adding
// twice). Every effect counter must end at 1, and no item may be both popped and processed.
//
// Each push and pop carries an identity chosen outside the retry loop and leaves a receipt in the
// same transaction, so a retry after commit_unknown_result (which failover produces) does not
// push or pop twice: the FoundationDB way of making non-idempotent transactions safe.
//
// And a watch whose stream is on a member that loses its leader (the two others paused), or on a
// member that freezes (paused itself), ends with connection_failed within seconds instead of
// waiting for a write it can never see.
#ifdef KVQ_WITH_ETCD
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/bytes.h"
#include "kvq/kvq.h"
#include "support/etcd_cluster.h"
#include "support/figures.h"

namespace kvq {
namespace {

using namespace std::chrono_literals;

class FaultClient {
 public:
  explicit FaultClient(std::shared_ptr<Database> db)
      : db_(std::move(db)),
        pq_(db_, Subspace(Tuple().append("fault").append("q"))),
        receipts_(Tuple().append("fault").append("r")) {}

  // Pushes `value` exactly once, however often the commit's outcome is unknown.
  void push(const std::string& value, std::int64_t priority) {
    const std::string receipt = receipts_.pack(Tuple().append("push").append(value));
    retry_forever([&] {
      db_->run([&](Transaction& tr) {
        if (tr.get(receipt)) return;  // an earlier attempt committed
        pq_.push(tr, value, priority);
        tr.set(receipt, "");
      });
    });
  }

  // Pops once (identity `pop_id`): the item, or nullopt if the queue was empty.
  std::optional<std::string> pop(const std::string& pop_id) {
    const std::string receipt = receipts_.pack(Tuple().append("pop").append(pop_id));
    std::optional<std::string> out;
    retry_forever([&] {
      out = db_->run([&](Transaction& tr) -> std::optional<std::string> {
        if (auto r = tr.get(receipt)) {
          if (r->empty()) return std::nullopt;
          return r->substr(1);
        }
        std::optional<std::string> v = pq_.pop_min(tr);
        tr.set(receipt, v ? "+" + *v : "");
        return v;
      });
    });
    return out;
  }

  // Takes the lowest item under a 2 s lease and processes it: one transaction acks it, adds 1 to
  // its effect counter and records which lease did it. Returns the value processed; nullopt if
  // there was no ready item or the lease was lost (it ran out during an outage: the item comes
  // back to another worker). lease_lost after an unknown result may also mean that our own
  // earlier attempt committed: the record tells.
  std::optional<std::string> take_and_process() {
    std::optional<Lease> lease;
    retry_forever([&] { lease = pq_.take_min(2s); });
    if (!lease) return std::nullopt;
    try {
      retry_forever([&] {
        db_->run([&](Transaction& tr) {
          pq_.ack(tr, *lease);
          tr.atomic_add(effect_key("effect", lease->value), std::int64_t{1});
          tr.set(effect_key("by", lease->value), lease->token);
        });
      });
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kLeaseLost) throw;
      leases_lost++;
      std::optional<std::string> by;
      retry_forever([&] {
        by = db_->run([&](Transaction& tr) { return tr.get(effect_key("by", lease->value)); });
      });
      if (by != lease->token) return std::nullopt;
    }
    return lease->value;
  }

  // How often each item was processed (the effect counters).
  std::map<std::string, std::int64_t> effects() {
    const Subspace counters = receipts_.subspace(Tuple().append("effect"));
    const KeyRange all = counters.range();
    std::map<std::string, std::int64_t> out;
    auto kvs = db_->run([&](Transaction& tr) { return tr.get_range(all.begin, all.end); });
    for (const KeyValue& kv : kvs) {
      out[counters.unpack(kv.key).get_string(0)] = common::decode_le64(kv.value);
    }
    return out;
  }

  std::atomic<long> final_errors{0};
  std::atomic<long> leases_lost{0};

 private:
  std::string effect_key(const char* kind, const std::string& value) const {
    return receipts_.pack(Tuple().append(kind).append(value));
  }

  // db->run retries the retryable errors; connection_failed (no member answered within the
  // failover budget) is final for it, so retry the same identity here.
  template <typename Fn>
  void retry_forever(Fn fn) {
    for (;;) {
      try {
        fn();
        return;
      } catch (const Error& e) {
        if (e.code() == ErrorCode::kLeaseLost) throw;  // final: the caller decides
        final_errors++;
        std::this_thread::sleep_for(100ms);
      }
    }
  }

  std::shared_ptr<Database> db_;
  PriorityQueue pq_;
  Subspace receipts_;
};

TEST(EtcdFault, KillFollowerThenLeaderAndPauseLeaderLosesNoAcknowledgedPushAndPopsNothingTwice) {
  if (!testing::EtcdCluster::available()) GTEST_SKIP() << "etcd not installed";
  testing::EtcdCluster cluster(3);
  auto db = open(cluster.url("prefix=fault/&timeout_ms=1500&failover_ms=8000"));

  constexpr int kClients = 4;
  constexpr int kWorkers = 2;  // lease workers (take_and_process), beside the clients
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::set<std::string> acked;
  std::map<std::string, int> popped;
  std::map<std::string, int> processed;
  std::atomic<long> pushes_after_leader_kill{0};
  std::atomic<bool> leader_killed{false};
  std::atomic<long> pushes_during_pause{0};
  std::atomic<bool> paused{false};
  std::vector<std::thread> clients;
  std::vector<std::unique_ptr<FaultClient>> fc;
  for (int c = 0; c < kClients + kWorkers; ++c) fc.push_back(std::make_unique<FaultClient>(db));
  for (int w = kClients; w < kClients + kWorkers; ++w) {
    clients.emplace_back([&, w] {
      while (!stop.load()) {
        if (auto v = fc[w]->take_and_process()) {
          std::lock_guard lock(mu);
          processed[*v]++;
        } else {
          std::this_thread::sleep_for(20ms);
        }
      }
    });
  }
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int n = 0; !stop.load(); ++n) {
        const std::string value = "c" + std::to_string(c) + "-" + std::to_string(n);
        fc[c]->push(value, n % 5);
        {
          std::lock_guard lock(mu);
          acked.insert(value);
        }
        if (leader_killed.load()) pushes_after_leader_kill++;
        if (paused.load()) pushes_during_pause++;
        if (n % 2 == 1) {
          auto v = fc[c]->pop("c" + std::to_string(c) + "-pop-" + std::to_string(n));
          if (v) {
            std::lock_guard lock(mu);
            popped[*v]++;
          }
        }
      }
    });
  }

  std::this_thread::sleep_for(1s);
  const int leader = cluster.leader();
  ASSERT_GE(leader, 0);
  const int follower = (leader + 1) % cluster.size();
  cluster.kill(follower);
  std::this_thread::sleep_for(1500ms);
  cluster.restart(follower);
  cluster.wait_healthy(30s);
  std::this_thread::sleep_for(500ms);
  const int leader2 = cluster.leader();
  ASSERT_GE(leader2, 0);
  cluster.kill(leader2);
  leader_killed = true;
  std::this_thread::sleep_for(2s);
  cluster.restart(leader2);
  cluster.wait_healthy(30s);
  std::this_thread::sleep_for(1s);
  // Named step: pause the leader for 8 s (the others elect a new one), then let it go on. (4 s
  // was too short under the load of the parallel test run once in session 23: no push was
  // acknowledged while paused, against 600-800 in a run alone.)
  const int leader3 = cluster.leader();
  ASSERT_GE(leader3, 0);
  cluster.pause(leader3);
  paused = true;
  std::this_thread::sleep_for(8s);
  paused = false;
  cluster.resume(leader3);
  cluster.wait_healthy(30s);
  std::this_thread::sleep_for(1s);
  stop = true;
  for (auto& t : clients) t.join();

  // Drain what is left (no faults now), after every lease a failed take may have left ran out.
  std::this_thread::sleep_for(2500ms);
  PriorityQueue pq(db, Subspace(Tuple().append("fault").append("q")));
  std::set<std::string> left;
  while (auto v = pq.pop_min()) EXPECT_TRUE(left.insert(*v).second) << "queued twice: " << *v;

  long errors = 0, leases_lost = 0;
  for (auto& f : fc) {
    errors += f->final_errors;
    leases_lost += f->leases_lost;
  }
  std::printf(
      "acked pushes %zu, popped %zu, processed under leases %zu, left %zu, pushes after leader "
      "kill %ld, pushes while a member was paused %ld, connection errors retried %ld, leases "
      "lost %ld\n",
      acked.size(), popped.size(), processed.size(), left.size(), pushes_after_leader_kill.load(),
      pushes_during_pause.load(), errors, leases_lost);
  testing::record_figure(testing::kEtcdMemberKills, 2);
  testing::record_figure("kills: etcd members paused (SIGSTOP) mid-workload", 1);
  testing::record_figure(
      testing::kOperationsChecked,
      static_cast<std::int64_t>(acked.size() + popped.size() + processed.size() + left.size()));
  EXPECT_GT(acked.size(), 20u);
  EXPECT_GT(processed.size(), 5u) << "the lease workers made no progress";
  for (const auto& [value, times] : processed) {
    EXPECT_EQ(times, 1) << value << " processed " << times << " times";
    EXPECT_FALSE(popped.count(value) || left.count(value)) << value << " processed and popped";
  }
  const std::map<std::string, std::int64_t> effects = fc[0]->effects();
  EXPECT_EQ(effects.size(), processed.size());
  for (const auto& [value, times] : effects) {
    EXPECT_EQ(times, 1) << value << ": its effect applied " << times << " times";
    EXPECT_TRUE(processed.count(value)) << value << ": an effect without a processing worker";
  }
  EXPECT_GT(pushes_after_leader_kill.load(), 0) << "no progress after the leader was killed";
  EXPECT_GT(pushes_during_pause.load(), 0) << "no progress while the leader was paused";
  for (const auto& [value, times] : popped) {
    EXPECT_EQ(times, 1) << value << " popped " << times << " times";
    EXPECT_FALSE(left.count(value)) << value << " popped and still queued";
  }
  for (const std::string& value : left) {
    EXPECT_TRUE(acked.count(value)) << "queued but never acknowledged: " << value;
  }
  for (const std::string& value : acked) {
    EXPECT_TRUE(popped.count(value) || left.count(value) || processed.count(value))
        << "acknowledged push lost: " << value;
  }
}

// How long a watch armed on `db` (whose preferred member is the one `fault` hits) takes to end
// once `fault` runs; nullopt if it did not end within 40 s. It must end failed
// (connection_failed), not fired: nothing was written.
std::optional<std::chrono::milliseconds> watch_end_after(Database& db,
                                                         const std::function<void()>& fault) {
  Transaction tr = db.create_transaction();
  tr.get("watched");
  Watch w = tr.watch("watched");
  tr.commit();
  std::this_thread::sleep_for(500ms);  // the stream is open
  fault();
  const auto start = std::chrono::steady_clock::now();
  try {
    if (!w.wait_for(40s)) return std::nullopt;
    ADD_FAILURE() << "the watch fired, but nothing was written";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kConnectionFailed) << e.what();
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

TEST(EtcdFault, AWatchWhoseClusterHasNoLeaderEndsInsteadOfWaitingForever) {
  if (!testing::EtcdCluster::available()) GTEST_SKIP() << "etcd not installed";
  testing::EtcdCluster cluster(3);
  auto db = open(cluster.url("prefix=wf/"));  // member 0 is preferred: the streams go there
  // etcd ends the stream of a watch that asked for a leader ("hasleader") once its member has
  // none; no other member has one to open it again on, so after the failover budget the watch
  // fails (connection_failed).
  const auto without_leader = watch_end_after(*db, [&] {
    cluster.pause(1);
    cluster.pause(2);
  });
  cluster.resume(1);
  cluster.resume(2);
  cluster.wait_healthy(30s);
  ASSERT_TRUE(without_leader) << "the watch outlived its member's leader by 40 s";
  EXPECT_LT(*without_leader, 20s);
  testing::record_figure("etcd watch ended after its member lost its leader, ms",
                         without_leader->count());
}

// A frozen member answers no keepalive ping: the channel drops the stream, which is opened again
// on another member from the same revision (since session 31; before, the watch failed), so a
// write made through the others fires the watch.
TEST(EtcdFault, AWatchOnAFrozenMemberMovesToAnotherAndFires) {
  if (!testing::EtcdCluster::available()) GTEST_SKIP() << "etcd not installed";
  testing::EtcdCluster cluster(3);
  auto db = open(cluster.url("prefix=wz/"));  // member 0 is preferred: the stream goes there
  Transaction tr = db->create_transaction();
  tr.get("watched");
  Watch w = tr.watch("watched");
  tr.commit();
  std::this_thread::sleep_for(500ms);  // the stream is open
  cluster.pause(0);
  const auto start = std::chrono::steady_clock::now();
  db->run([](Transaction& t) { t.set("watched", "changed"); });  // through member 1 or 2
  const bool fired = w.wait_for(40s);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  cluster.resume(0);
  EXPECT_TRUE(fired) << "the watch on a frozen member did not fire in 40 s";
  EXPECT_LT(took, 30s);
  testing::record_figure("etcd watch fired after its member froze, ms", took.count());
}

}  // namespace
}  // namespace kvq
#endif  // KVQ_WITH_ETCD
