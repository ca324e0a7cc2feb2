// FairQueue pop throughput against Queue's (issue 15): 1 and 32 clients popping, plain, in
// high-contention mode (-hc), and with flat combining (-comb), with 1 tenant and with 10,000
// tenants (the FairQueue's items spread evenly over them; a Queue has no tenants, so its row is the
// same workload without them), and queues-rr: 10,000 plain Queues holding the same items, popped in
// turn (a fair pop's least work: one tenant's items per pop, 10,000 places apart in the store,
// with no ring to keep). Each measurement runs on a fresh memory: database prefilled with
// 400,000 items, then 1,000 pops of warm-up (other URLs: 4,000 items, 300 pops, in a fresh
// subspace); a run that drains them is timed to its last pop.
//   fair_bench [seconds per measurement, default 1] [URL, default memory:] [structure [tenants
//   [clients]]]  (the last three: run only the matching rows, e.g. to profile one of them; a
//   tenant count other than 1 and 10,000 runs the FairQueue rows with that many tenants)
// Prints one row per measurement: structure, mode, tenants, clients, pops/s, retries per pop, and
// CPU µs per pop (the whole process's CPU time while the clients popped, over the pops).
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kvq/kvq.h"

namespace {

using Clock = std::chrono::steady_clock;

// Items prefilled, and pushed per prefill transaction: on memory:, and on the other engines (etcd
// bounds a transaction to 128 operations, and a fair push to a new tenant writes 4 keys; a deep
// prefill there takes minutes).
constexpr int kItems = 400'000;
constexpr int kPerTransaction = 500;
constexpr int kItemsOnDisk = 4'000;
constexpr int kPerTransactionOnDisk = 25;
// Warm-up pops: enough to file every tenant the prefill woke, 16 per pop (10,000 tenants on
// memory:; on the other engines, the 4,000 of the 10,000 tenants that got an item).
constexpr int kWarmUpPops = 1000;
constexpr int kWarmUpPopsOnDisk = 300;

// A pop of one structure, returning false when it found nothing.
using PopFn = std::function<bool()>;

// Where a pushed item goes: the i-th item of the prefill, its value, the transaction.
using PushFn = std::function<void(kvq::Transaction&, int, const std::string&)>;

// Prefills `items` items, `per_transaction` per transaction.
void prefill(kvq::Database& db, const PushFn& push, int items, int per_transaction) {
  for (int done = 0; done < items; done += per_transaction) {
    db.run([&](kvq::Transaction& tr) {
      for (int i = done; i < done + per_transaction; ++i) push(tr, i, "item-" + std::to_string(i));
    });
  }
}

// The process's CPU time so far, in seconds (every thread's).
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Measured {
  double rate = 0;        // pops/s
  std::int64_t pops = 0;  // pops made
  double cpu_seconds = 0;
};

// Pops/s of `clients` threads running `pop` for `seconds` (or until the structure is drained: the
// rate is over the time until the last thread stopped, so a drained run is not diluted by the idle
// rest), and the CPU time they took.
Measured measure(const PopFn& pop, int clients, double seconds) {
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> ops{0};
  std::atomic<int> running{clients};
  std::vector<Clock::time_point> ends(static_cast<std::size_t>(clients));
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  const double cpu_start = process_cpu_seconds();
  for (std::size_t c = 0; c < ends.size(); ++c) {
    threads.emplace_back([&, c] {
      while (!stop.load() && pop()) ++ops;
      ends[c] = Clock::now();
      --running;
    });
  }
  const auto deadline = start + std::chrono::duration<double>(seconds);
  while (Clock::now() < deadline && running.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  for (auto& t : threads) t.join();
  const auto last = *std::max_element(ends.begin(), ends.end());
  const double elapsed = std::chrono::duration<double>(last - start).count();
  return {static_cast<double>(ops.load()) / elapsed, ops.load(), process_cpu_seconds() - cpu_start};
}

// One of the structures a row measures, prefilled, with its pop.
struct Structure {
  PushFn push;
  PopFn pop;
};

// `tenants` plain Queues popped in turn by a shared counter (queues-rr: the least a fair pop has
// to touch, one tenant's items per pop, with no ring to keep; it skips empty queues but has no
// index of the non-empty ones, so it is a bound, not a FairQueue).
Structure round_robin(std::shared_ptr<kvq::Database> db, const kvq::Subspace& space, int tenants) {
  auto queues = std::make_shared<std::vector<kvq::Queue>>();
  for (int t = 0; t < tenants; ++t)
    queues->emplace_back(db, space.subspace(kvq::Tuple().append(t)));
  auto turn = std::make_shared<std::atomic<std::uint64_t>>(0);
  const auto n = static_cast<std::uint64_t>(tenants);
  return {[queues, tenants](kvq::Transaction& tr, int i, const std::string& value) {
            (*queues)[static_cast<std::size_t>(i % tenants)].push(tr, value);
          },
          [queues, turn, n] {
            for (std::uint64_t tried = 0; tried < n; ++tried) {
              if ((*queues)[turn->fetch_add(1) % n].pop()) return true;
            }
            return false;
          }};
}

void row(const std::string& url, const std::string& kind, int tenants, int clients,
         double seconds) {
  auto db = kvq::open(url);
  // A subspace of its own per row (a shared server keeps what earlier rows left).
  const kvq::Subspace space(
      kvq::Tuple()
          .append("fair_bench")
          .append(kind)
          .append(static_cast<std::int64_t>(Clock::now().time_since_epoch().count())));
  kvq::QueueOptions qo;
  qo.high_contention = kind == "queue-hc";
  qo.combine = kind == "queue-comb";
  kvq::Queue q(db, space, qo);
  kvq::FairQueueOptions fo;
  fo.combine = kind == "fair-comb";
  fo.high_contention = kind == "fair-hc";
  kvq::FairQueue fq(db, space, fo);
  const bool fair = kind.starts_with("fair");
  const bool has_tenants = fair || kind == "queues-rr";
  Structure s;
  if (kind == "queues-rr") {
    s = round_robin(db, space, tenants);
  } else if (fair) {
    s = {[&](kvq::Transaction& tr, int i, const std::string& value) {
           fq.push(tr, "tenant-" + std::to_string(i % tenants), value);
         },
         [&] { return fq.pop().has_value(); }};
  } else {
    s = {[&](kvq::Transaction& tr, int, const std::string& value) { q.push(tr, value); },
         [&] { return q.pop().has_value(); }};
  }
  const bool in_memory = url.starts_with("memory:");
  prefill(*db, s.push, in_memory ? kItems : kItemsOnDisk,
          in_memory ? kPerTransaction : kPerTransactionOnDisk);
  // Warm-up: the first pops of a FairQueue file the tenants the prefill woke (16 per pop); measure
  // the steady state after them.
  for (int i = 0; i < (in_memory ? kWarmUpPops : kWarmUpPopsOnDisk); ++i) s.pop();
  const auto before = db->stats().retries;
  const Measured m = measure(s.pop, clients, seconds);
  const double pops = static_cast<double>(m.pops);
  std::printf("%-9s %8d %8d %12.0f %10.3f %10.2f\n", kind.c_str(), has_tenants ? tenants : 0,
              clients, m.rate,
              pops > 0 ? static_cast<double>(db->stats().retries - before) / pops : 0.0,
              pops > 0 ? m.cpu_seconds * 1e6 / pops : 0.0);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::stod(argv[1]) : 1.0;
  const std::string url = argc > 2 ? argv[2] : "memory:";
  const std::string only_kind = argc > 3 ? argv[3] : "";
  const int only_tenants = argc > 4 ? std::stoi(argv[4]) : 0;
  const int only_clients = argc > 5 ? std::stoi(argv[5]) : 0;
  const auto selected = [&](const std::string& kind, int tenants, int clients) {
    return (only_kind.empty() || kind == only_kind) &&
           (only_tenants == 0 || tenants == only_tenants || kind.starts_with("queue-")) &&
           (only_clients == 0 || clients == only_clients);
  };
  std::printf("%-9s %8s %8s %12s %10s %10s\n", "structure", "tenants", "clients", "pops/s",
              "retries/op", "cpu_us/op");
  for (int clients : {1, 32}) {
    for (const char* kind : {"queue", "queue-hc", "queue-comb"}) {
      if (selected(kind, 1, clients)) row(url, kind, 1, clients, seconds);
    }
    for (const char* kind : {"queues-rr", "fair", "fair-hc", "fair-comb"}) {
      // A tenant count given on the command line replaces the two the table compares.
      const std::vector<int> tenant_counts =
          only_tenants > 1 ? std::vector<int>{only_tenants} : std::vector<int>{1, 10'000};
      for (int tenants : tenant_counts) {
        if (tenants == 1 && std::string_view(kind) == "queues-rr") continue;  // that is `queue`
        if (selected(kind, tenants, clients)) row(url, kind, tenants, clients, seconds);
      }
    }
  }
  return 0;
}
