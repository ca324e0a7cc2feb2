// Transactions per second of the memory engine: single-key set+commit transactions and single-key
// get transactions, at 1, 2, 4 and 8 threads, each through Database::run (the retry loop).
//
// Usage: txn_bench [--json] [--seconds=S] [--url=memory:]
// Prints a table (or a JSON object with --json): tx/s is wall-clock throughput; tx/cpu-s is
// transactions per CPU-second the process used, which does not depend on other load on the
// machine (x cores = the throughput the cores would give if the process had them to itself).
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "kvq/database.h"

namespace {

struct Result {
  std::string workload;
  int threads;
  double tx_per_s;
  double tx_per_batch;  // commits per commit batch (group commit); 0 for reads
  double tx_per_cpu_s;
};

struct Measured {
  double tx_per_s;
  std::uint64_t count;
  double tx_per_cpu_s;  // transactions per CPU-second of this process (load-independent)
};

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

std::string key(int thread, int i) {
  return "bench/" + std::to_string(thread) + "/" + std::to_string(1000 + i % 1000);
}

template <typename Body>
Measured measure(int threads, double seconds, Body body) {
  std::atomic<bool> go{false}, stop{false};
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(threads) * 16, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      std::uint64_t n = 0;
      // Precomputed keys keep string building out of the measurement.
      std::vector<std::string> keys;
      for (int i = 0; i < 1000; ++i) keys.push_back(key(t, i));
      while (!stop.load(std::memory_order_relaxed)) {
        for (int i = 0; i < 64; ++i) body(keys[(n + i) % keys.size()]);
        n += 64;
      }
      counts[static_cast<std::size_t>(t) * 16] = n;
    });
  }
  auto start = std::chrono::steady_clock::now();
  const double cpu_start = process_cpu_seconds();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : pool) th.join();
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = process_cpu_seconds() - cpu_start;
  std::uint64_t total = 0;
  for (int t = 0; t < threads; ++t) total += counts[static_cast<std::size_t>(t) * 16];
  return {static_cast<double>(total) / elapsed, total, static_cast<double>(total) / cpu};
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  double seconds = 1.0;
  std::string url = "memory:";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json") {
      json = true;
    } else if (a.rfind("--seconds=", 0) == 0) {
      seconds = std::atof(a.c_str() + 10);
    } else if (a.rfind("--url=", 0) == 0) {
      url = a.substr(6);
    } else {
      std::fprintf(stderr, "usage: txn_bench [--json] [--seconds=S] [--url=URL]\n");
      return 2;
    }
  }
  std::vector<Result> results;
  const std::string value(16, 'v');
  for (int threads : {1, 2, 4, 8}) {
    auto db = kvq::open(url);
    auto before = db->stats().commit_batches;
    Measured w = measure(threads, seconds, [&](const std::string& k) {
      db->run([&](kvq::Transaction& tr) { tr.set(k, value); });
    });
    const auto batches = db->stats().commit_batches - before;
    results.push_back({"set+commit", threads, w.tx_per_s,
                       batches ? static_cast<double>(w.count) / static_cast<double>(batches) : 0,
                       w.tx_per_cpu_s});
    Measured r = measure(threads, seconds, [&](const std::string& k) {
      db->run([&](kvq::Transaction& tr) { return tr.get(k); });
    });
    results.push_back({"get", threads, r.tx_per_s, 0, r.tx_per_cpu_s});
  }
  const unsigned cores = std::thread::hardware_concurrency();
  if (json) {
    std::printf("{\"url\": \"%s\", \"cores\": %u, \"seconds\": %.2f, \"results\": [", url.c_str(),
                cores, seconds);
    for (std::size_t i = 0; i < results.size(); ++i) {
      std::printf(
          "%s{\"workload\": \"%s\", \"threads\": %d, \"tx_per_s\": %.0f, "
          "\"tx_per_batch\": %.2f, \"tx_per_cpu_s\": %.0f}",
          i ? ", " : "", results[i].workload.c_str(), results[i].threads, results[i].tx_per_s,
          results[i].tx_per_batch, results[i].tx_per_cpu_s);
    }
    std::printf("]}\n");
  } else {
    std::printf("%s, %u cores, %.1f s per point\n", url.c_str(), cores, seconds);
    std::printf("%-12s %8s %14s %14s %10s\n", "workload", "threads", "tx/s", "tx/cpu-s",
                "tx/batch");
    for (const Result& r : results) {
      std::printf("%-12s %8d %14.0f %14.0f %10.2f\n", r.workload.c_str(), r.threads, r.tx_per_s,
                  r.tx_per_cpu_s, r.tx_per_batch);
    }
  }
  return 0;
}
