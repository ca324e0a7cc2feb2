// `kvq bench`: push and pop throughput by client count, plain vs high-contention pops, for Queue
// and PriorityQueue. Each measurement uses a fresh database (memory:) or a fresh subspace.
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <thread>
#include <vector>

#include "kvq/kvq.h"
#include "layers/item_store.h"
#include "tools/kvq/commands.h"

namespace kvq::cli {
namespace {

struct Row {
  std::string kind, mode, op;
  int clients = 0;
  std::int64_t ops = 0;
  double seconds = 0, ops_per_s = 0, retries_per_op = 0, conflicts_per_op = 0, p50_us = 0,
         p99_us = 0;
  // High-contention pops: share that registered a request, requests per fulfilment batch,
  // fulfilment transactions that conflicted per batch committed.
  double staged_share = 0, batch_size = 0, batch_conflicts = 0;
  // Process CPU time (user + system) per operation: the work per op, independent of how much of
  // the machine other processes took.
  double cpu_us_per_op = 0;
};

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::size_t i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

Row measure(const BenchOptions& o, const std::string& kind, const std::string& mode,
            const std::string& op, int clients, int seq) {
  auto db = kvq::open(o.url);
  const bool hc = mode == "hc";
  Subspace space(Tuple().append("bench").append(seq).append(kind));
  QueueOptions qo;
  qo.high_contention = hc;
  qo.contention.batch_size = o.batch_size;
  PriorityQueueOptions po;
  po.high_contention = hc;
  po.contention.batch_size = o.batch_size;
  Queue q(db, space, qo);
  PriorityQueue pq(db, space, po);
  const bool is_pq = kind == "pq";
  if (op == "pop") {
    // Prefill in large transactions.
    std::mt19937 gen(42);
    for (int done = 0; done < o.prefill;) {
      int n = std::min(1000, o.prefill - done);
      db->run([&](Transaction& tr) {
        for (int i = 0; i < n; ++i) {
          std::string v = "item-" + std::to_string(done + i);
          if (is_pq) {
            pq.push(tr, v, static_cast<std::int64_t>(gen() % 100));
          } else {
            q.push(tr, v);
          }
        }
      });
      done += n;
    }
  }
  const DatabaseStats before = db->stats();
  auto& hs = detail::contention_stats();
  const std::uint64_t staged0 = hs.staged_pops, fast0 = hs.fast_pops, batches0 = hs.batches,
                      bconf0 = hs.batch_conflicts, served0 = hs.served;
  std::atomic<bool> stop{false};
  std::atomic<bool> drained{false};
  const double cpu0 = cpu_seconds();
  std::vector<std::vector<double>> lat(clients);
  std::vector<std::thread> threads;
  const auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937 gen(static_cast<unsigned>(c + 1));
      std::string value(16, 'v');
      for (std::uint64_t n = 0; !stop.load(std::memory_order_relaxed); ++n) {
        auto s = std::chrono::steady_clock::now();
        if (op == "push") {
          if (is_pq) {
            pq.push(value, static_cast<std::int64_t>(gen() % 100));
          } else {
            q.push(value);
          }
        } else {
          std::optional<std::string> v;
          if (is_pq) {
            v = (n + static_cast<std::uint64_t>(c)) % 2 ? pq.pop_max() : pq.pop_min();
          } else {
            v = q.pop();
          }
          if (!v) {
            drained = true;
            stop = true;
            break;
          }
        }
        lat[c].push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s).count());
      }
    });
  }
  while (!stop && std::chrono::steady_clock::now() - t0 < std::chrono::duration<double>(o.seconds)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop = true;
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = cpu_seconds() - cpu0;
  const DatabaseStats after = db->stats();
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  Row r;
  r.kind = kind;
  r.mode = mode;
  r.op = op;
  r.clients = clients;
  r.ops = static_cast<std::int64_t>(all.size());
  r.seconds = secs;
  r.ops_per_s = static_cast<double>(r.ops) / secs;
  if (r.ops > 0) {
    r.cpu_us_per_op = cpu * 1e6 / static_cast<double>(r.ops);
    r.retries_per_op = static_cast<double>(after.retries - before.retries) / static_cast<double>(r.ops);
    r.conflicts_per_op =
        static_cast<double>(after.conflicts - before.conflicts) / static_cast<double>(r.ops);
  }
  const double staged = static_cast<double>(hs.staged_pops - staged0);
  const double fast = static_cast<double>(hs.fast_pops - fast0);
  const double batches = static_cast<double>(hs.batches - batches0);
  if (staged + fast > 0) r.staged_share = staged / (staged + fast);
  if (batches > 0) {
    r.batch_size = static_cast<double>(hs.served - served0) / batches;
    r.batch_conflicts = static_cast<double>(hs.batch_conflicts - bconf0) / batches;
  }
  r.p50_us = percentile(all, 0.50);
  r.p99_us = percentile(all, 0.99);
  if (drained && op == "pop") {
    std::fprintf(stderr, "kvq bench: note: %s %s pop at %d clients drained the %d prefilled items\n",
                 kind.c_str(), mode.c_str(), clients, o.prefill);
  }
  return r;
}

}  // namespace

int run_bench(const BenchOptions& o) {
  std::vector<Row> rows;
  int seq = 0;
  if (!o.json) {
    std::printf("%-6s %-6s %-5s %7s %10s %10s %12s %9s %9s %8s %7s %6s %8s\n", "kind", "mode",
                "op", "clients", "ops/s", "retries/op", "conflicts/op", "p50 us", "p99 us",
                "cpu us/op", "staged", "batch", "bconf/b");
  }
  for (const auto& op : o.ops) {
    for (const auto& kind : o.kinds) {
      for (const auto& mode : o.modes) {
        if (op == "push" && mode == "hc" &&
            std::find(o.modes.begin(), o.modes.end(), "plain") != o.modes.end()) {
          continue;  // pushes do not depend on the pop mode
        }
        for (int c : o.clients) {
          Row r = measure(o, kind, mode, op, c, seq++);
          if (!o.json) {
            std::printf(
                "%-6s %-6s %-5s %7d %10.0f %10.3f %12.3f %9.1f %9.1f %8.1f %6.0f%% %6.1f %8.3f\n",
                r.kind.c_str(), r.mode.c_str(), r.op.c_str(), r.clients, r.ops_per_s,
                r.retries_per_op, r.conflicts_per_op, r.p50_us, r.p99_us, r.cpu_us_per_op,
                100 * r.staged_share, r.batch_size, r.batch_conflicts);
            std::fflush(stdout);
          }
          rows.push_back(std::move(r));
        }
      }
    }
  }
  if (o.json) {
    nlohmann::json j;
    j["url"] = o.url;
    j["seconds"] = o.seconds;
    j["batch_size"] = o.batch_size;
    j["nproc"] = std::thread::hardware_concurrency();
    j["results"] = nlohmann::json::array();
    for (const auto& r : rows) {
      j["results"].push_back({{"kind", r.kind},
                              {"mode", r.mode},
                              {"op", r.op},
                              {"clients", r.clients},
                              {"ops", r.ops},
                              {"seconds", r.seconds},
                              {"ops_per_s", r.ops_per_s},
                              {"retries_per_op", r.retries_per_op},
                              {"conflicts_per_op", r.conflicts_per_op},
                              {"p50_us", r.p50_us},
                              {"p99_us", r.p99_us},
                              {"cpu_us_per_op", r.cpu_us_per_op},
                              {"staged_share", r.staged_share},
                              {"requests_per_batch", r.batch_size},
                              {"batch_conflicts_per_batch", r.batch_conflicts}});
    }
    std::cout << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace kvq::cli
