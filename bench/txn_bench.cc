// Transactions per second of the memory engine: single-key set+commit transactions and single-key
// get transactions, at 1, 2, 4 and 8 threads, each through Database::run (the retry loop).
//
// Usage: txn_bench [--json] [--seconds=S] [--url=memory:]
// Prints a table (or a JSON object with --json).
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
  std::uint64_t batches;
};

std::string key(int thread, int i) {
  return "bench/" + std::to_string(thread) + "/" + std::to_string(1000 + i % 1000);
}

template <typename Body>
double measure(int threads, double seconds, Body body) {
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
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : pool) th.join();
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::uint64_t total = 0;
  for (int t = 0; t < threads; ++t) total += counts[static_cast<std::size_t>(t) * 16];
  return static_cast<double>(total) / elapsed;
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
    double w = measure(threads, seconds, [&](const std::string& k) {
      db->run([&](kvq::Transaction& tr) { tr.set(k, value); });
    });
    results.push_back({"set+commit", threads, w, db->stats().commit_batches - before});
    double r = measure(threads, seconds, [&](const std::string& k) {
      db->run([&](kvq::Transaction& tr) { return tr.get(k); });
    });
    results.push_back({"get", threads, r, 0});
  }
  const unsigned cores = std::thread::hardware_concurrency();
  if (json) {
    std::printf("{\"url\": \"%s\", \"cores\": %u, \"seconds\": %.2f, \"results\": [", url.c_str(),
                cores, seconds);
    for (std::size_t i = 0; i < results.size(); ++i) {
      std::printf("%s{\"workload\": \"%s\", \"threads\": %d, \"tx_per_s\": %.0f, \"batches\": %llu}",
                  i ? ", " : "", results[i].workload.c_str(), results[i].threads,
                  results[i].tx_per_s, static_cast<unsigned long long>(results[i].batches));
    }
    std::printf("]}\n");
  } else {
    std::printf("%s, %u cores, %.1f s per point\n", url.c_str(), cores, seconds);
    std::printf("%-12s %8s %14s %12s\n", "workload", "threads", "tx/s", "batches");
    for (const Result& r : results) {
      std::printf("%-12s %8d %14.0f %12llu\n", r.workload.c_str(), r.threads, r.tx_per_s,
                  static_cast<unsigned long long>(r.batches));
    }
  }
  return 0;
}
