// Transactions per second of the memory engine: single-key set+commit transactions and single-key
// get transactions, at 1, 2, 4 and 8 threads, each through Database::run (the retry loop).
//
// Usage: txn_bench [--json] [--seconds=S] [--url=memory:] [--threads=1,2,4,8]
//        txn_bench --pops [--url=memory:]
// --seconds: a decimal number, 0.01..3600 (default 1); --threads: the client counts to measure
// (1..4096 each); --no-reads: only the set+commit workload. Exit status: 0 done, 1 a kvq error,
// 2 bad arguments (nothing was measured).
// Prints a table (or a JSON object with --json): tx/s is wall-clock throughput; tx/cpu-s is
// transactions per CPU-second the process used, which does not depend on other load on the
// machine (x cores = the throughput the cores would give if the process had them to itself).
//
// --pops: the cost of one kvq::Queue pop with 10 and with 100,000 items queued, each after
// 90,000 pops from the front of the queue (the garbage an engine must not walk over), with and
// without an old transaction open that keeps the popped items' tombstones: the median
// microseconds of 2,000 pops, each followed by an untimed push that keeps the queue's length,
// and its ratio to a pop with 10 queued and no garbage. Use a URL whose MVCC window outlasts the
// run (memory:?mvcc_window_ms=600000), or the old reader's version is released after 5 s.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kvq/database.h"
#include "kvq/queue.h"
#include "kvq/subspace.h"
#include "kvq/tuple.h"
#include "tools/kvq/bench_args.h"

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

// Runs `body` on `threads` threads for `seconds`. Throws the first exception a body threw, after
// stopping the other threads.
template <typename Body>
Measured measure(int threads, double seconds, Body body) {
  std::atomic<bool> go{false}, stop{false};
  kvq::bench_args::FirstError error(stop);
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(threads) * 16, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      error.run([&] {
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
    });
  }
  auto start = std::chrono::steady_clock::now();
  const double cpu_start = process_cpu_seconds();
  go = true;
  kvq::bench_args::sleep_unless_stopped(stop, seconds);
  stop = true;
  for (auto& th : pool) th.join();
  error.rethrow();
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = process_cpu_seconds() - cpu_start;
  std::uint64_t total = 0;
  for (int t = 0; t < threads; ++t) total += counts[static_cast<std::size_t>(t) * 16];
  return {static_cast<double>(total) / elapsed, total, static_cast<double>(total) / cpu};
}

// Median microseconds of one pop with `queued` items in the queue, after `popped` pops. With
// `old_reader`, a transaction that read before the pops stays open (its read version holds the
// MVCC floor down, so the popped items' tombstones stay).
double pop_us(const std::string& url, int queued, int popped, bool old_reader) {
  auto db = kvq::open(url);
  kvq::Queue q(db, kvq::Subspace(kvq::Tuple().append("pops")));
  const std::string value(16, 'v');
  for (int i = 0; i < popped + queued; ++i) q.push(value);
  kvq::Transaction reader = db->create_transaction();
  if (old_reader) reader.get("anything");
  for (int i = 0; i < popped; ++i) q.pop();
  std::vector<double> us;
  for (int i = 0; i < 2000; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    q.pop();
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    q.push(value);
  }
  std::nth_element(us.begin(), us.begin() + static_cast<std::ptrdiff_t>(us.size() / 2), us.end());
  return us[us.size() / 2];
}

int run_pops(const std::string& url) {
  const double clean = pop_us(url, 10, 0, false);
  std::printf("%s: median pop with 10 queued, nothing popped before: %.2f us\n", url.c_str(),
              clean);
  for (bool old_reader : {false, true}) {
    for (int queued : {10, 100000}) {
      const double t = pop_us(url, queued, 90000, old_reader);
      std::printf("  %6d queued after 90,000 pops%s: %.2f us (%.2f x)\n", queued,
                  old_reader ? ", an old reader open" : "", t, t / clean);
    }
  }
  return 0;
}

constexpr const char* kUsage =
    "usage: txn_bench [--json] [--seconds=S] [--url=URL] [--threads=1,2,4,8] [--no-reads] "
    "[--pops]\n";

// The command line.
struct Options {
  bool json = false;
  bool pops = false;
  double seconds = 1.0;
  std::vector<int> thread_counts = {1, 2, 4, 8};
  bool reads = true;
  std::string url = "memory:";
  bool help = false;
};

// Throws UsageError naming the argument that is not one kUsage shows.
Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--json") {
      o.json = true;
    } else if (a.starts_with("--seconds=")) {
      o.seconds = kvq::bench_args::parse_number("--seconds", a.substr(10), 0.01, 3600);
    } else if (a.starts_with("--url=")) {
      o.url = a.substr(6);
    } else if (a.starts_with("--threads=")) {
      o.thread_counts = kvq::bench_args::parse_int_list("--threads", a.substr(10), 1, 4096);
    } else if (a == "--no-reads") {
      o.reads = false;
    } else if (a == "--pops") {
      o.pops = true;
    } else if (a == "--help" || a == "-h") {
      o.help = true;
    } else {
      throw kvq::bench_args::UsageError("unknown argument '" + std::string(a) + "'");
    }
  }
  return o;
}

// The set+commit (and get) rows of each thread count.
std::vector<Result> measure_all(const Options& o) {
  std::vector<Result> results;
  const std::string value(16, 'v');
  for (int threads : o.thread_counts) {
    auto db = kvq::open(o.url);
    auto before = db->stats().commit_batches;
    Measured w = measure(threads, o.seconds, [&](const std::string& k) {
      db->run([&](kvq::Transaction& tr) { tr.set(k, value); });
    });
    const auto batches = db->stats().commit_batches - before;
    results.push_back({"set+commit", threads, w.tx_per_s,
                       batches ? static_cast<double>(w.count) / static_cast<double>(batches) : 0,
                       w.tx_per_cpu_s});
    if (!o.reads) continue;
    Measured r = measure(threads, o.seconds, [&](const std::string& k) {
      db->run([&](kvq::Transaction& tr) { return tr.get(k); });
    });
    results.push_back({"get", threads, r.tx_per_s, 0, r.tx_per_cpu_s});
  }
  return results;
}

void print_results(const Options& o, const std::vector<Result>& results) {
  const unsigned cores = std::thread::hardware_concurrency();
  if (o.json) {
    std::printf("{\"url\": \"%s\", \"cores\": %u, \"seconds\": %.2f, \"results\": [", o.url.c_str(),
                cores, o.seconds);
    for (std::size_t i = 0; i < results.size(); ++i) {
      std::printf(
          "%s{\"workload\": \"%s\", \"threads\": %d, \"tx_per_s\": %.0f, "
          "\"tx_per_batch\": %.2f, \"tx_per_cpu_s\": %.0f}",
          i ? ", " : "", results[i].workload.c_str(), results[i].threads, results[i].tx_per_s,
          results[i].tx_per_batch, results[i].tx_per_cpu_s);
    }
    std::printf("]}\n");
  } else {
    std::printf("%s, %u cores, %.1f s per point\n", o.url.c_str(), cores, o.seconds);
    std::printf("%-12s %8s %14s %14s %10s\n", "workload", "threads", "tx/s", "tx/cpu-s",
                "tx/batch");
    for (const Result& r : results) {
      std::printf("%-12s %8d %14.0f %14.0f %10.2f\n", r.workload.c_str(), r.threads, r.tx_per_s,
                  r.tx_per_cpu_s, r.tx_per_batch);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return kvq::bench_args::run_main("txn_bench", kUsage, [&] {
    const Options o = parse_options(argc, argv);
    if (o.help) {
      std::printf("%s", kUsage);
      return 0;
    }
    kvq::bench_args::open_url("--url", o.url);  // a URL kvq cannot read fails before measuring
    if (o.pops) return run_pops(o.url);
    print_results(o, measure_all(o));
    return 0;
  });
}
