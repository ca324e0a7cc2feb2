// rocksdb_bench: committed write transactions per second on the durable engine, at several numbers
// of concurrent clients, to show group commit (concurrent commits sharing one RocksDB write and
// one WAL fsync).
//
// Every client is a thread running db->run() transactions that each blind-write one new key with
// a 100-byte value (no conflicts), for --seconds per client count. Printed per client count:
// commits/s, commit batches (engine writes = WAL syncs), commits per batch, mean and p99 commit
// latency, and the speedup over 1 client.
//
// Usage: rocksdb_bench [--clients 1,4,16,64] [--seconds 2] [--sync true|false] [--dir DIR] [--json]
//   --dir   where to create the databases (a fresh subdirectory per run, removed afterwards);
//           default $TMPDIR or /tmp. Put it on the disk you want to measure.
//   --seconds: a decimal number, 0.01..3600; --clients: 1..4096 each.
// Exit status: 0 done, 1 an error (a kvq error, the directory), 2 bad arguments.
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kvq/database.h"
#include "kvq/error.h"
#include "tools/kvq/bench_args.h"

namespace {

struct Config {
  std::vector<int> clients = {1, 4, 16, 64};
  double seconds = 2.0;
  bool sync = true;
  bool json = false;
  std::string dir;
};

struct Result {
  int clients = 0;
  std::uint64_t commits = 0;
  std::uint64_t batches = 0;
  double seconds = 0;
  double mean_latency_us = 0;
  double p99_latency_us = 0;
  double rate() const { return seconds > 0 ? static_cast<double>(commits) / seconds : 0; }
};

constexpr const char* kUsage =
    "usage: rocksdb_bench [--clients 1,4,16,64] [--seconds 2] [--sync true|false] [--dir DIR] "
    "[--json]\n";

// Throws UsageError naming the argument that is not one kUsage shows.
Config parse(int argc, char** argv) {
  using kvq::bench_args::UsageError;
  Config c;
  const char* tmp = std::getenv("TMPDIR");
  c.dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--clients") {
      c.clients = kvq::bench_args::parse_int_list("--clients", next(), 1, 4096);
    } else if (a == "--seconds") {
      c.seconds = kvq::bench_args::parse_number("--seconds", next(), 0.01, 3600);
    } else if (a == "--sync") {
      const std::string v = next();
      if (v != "true" && v != "false") throw UsageError("--sync: '" + v + "' is not true or false");
      c.sync = v == "true";
    } else if (a == "--dir") {
      c.dir = next();
    } else if (a == "--json") {
      c.json = true;
    } else if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      std::exit(0);
    } else {
      throw UsageError("unknown argument '" + a + "'");
    }
  }
  return c;
}

// Client `c`: commits one new key with a 100-byte value per transaction until `stop`, keeping
// each commit's latency (µs) in `lat`.
void write_until_stopped(kvq::Database& db, int c, const std::atomic<bool>& stop,
                         std::vector<std::uint32_t>& lat) {
  const std::string value(100, 'v');
  char key[48];
  for (std::uint64_t n = 0; !stop.load(std::memory_order_relaxed); ++n) {
    std::snprintf(key, sizeof key, "bench/%04d/%012llu", c, static_cast<unsigned long long>(n));
    const auto t0 = std::chrono::steady_clock::now();
    db.run([&](kvq::Transaction& tr) { tr.set(key, value); });
    const auto t1 = std::chrono::steady_clock::now();
    lat.push_back(static_cast<std::uint32_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(t1 - t0).count()));
  }
}

// Removes the directory `path` when it goes out of scope.
struct RemovedAtExit {
  std::filesystem::path path;
  ~RemovedAtExit() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

Result run_one(const Config& cfg, int clients) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(cfg.dir) / ("kvq-rocksdb-bench-" + std::to_string(::getpid()) +
                                            "-" + std::to_string(clients));
  fs::remove_all(dir);
  const RemovedAtExit cleanup{dir};  // after the database closed, also when the run failed
  Result r;
  r.clients = clients;
  {
    auto db = kvq::open("rocksdb:" + dir.string() + (cfg.sync ? "" : "?sync=false"));
    // Warm up: open files, first WAL sync.
    db->run([&](kvq::Transaction& tr) { tr.set("warmup", std::string(100, 'v')); });

    std::atomic<bool> stop{false};
    kvq::bench_args::FirstError error(stop);
    std::vector<std::vector<std::uint32_t>> latencies(static_cast<std::size_t>(clients));
    std::vector<std::thread> threads;
    const auto batches_before = db->stats().commit_batches;
    const auto start = std::chrono::steady_clock::now();
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&, c] {
        error.run(
            [&] { write_until_stopped(*db, c, stop, latencies[static_cast<std::size_t>(c)]); });
      });
    }
    kvq::bench_args::sleep_unless_stopped(stop, cfg.seconds);
    stop.store(true);
    for (auto& t : threads) t.join();
    error.rethrow();
    const auto end = std::chrono::steady_clock::now();
    r.seconds = std::chrono::duration<double>(end - start).count();
    r.batches = db->stats().commit_batches - batches_before;

    std::vector<std::uint32_t> all;
    for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
    r.commits = all.size();
    if (!all.empty()) {
      double sum = 0;
      for (auto v : all) sum += v;
      r.mean_latency_us = sum / static_cast<double>(all.size());
      const std::size_t idx = std::min(all.size() - 1, all.size() * 99 / 100);
      std::nth_element(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(idx), all.end());
      r.p99_latency_us = all[idx];
    }
  }
  return r;
}

// Prints the rows of `results` (table, or JSON with cfg.json), each with its speed-up over the
// first.
void print_results(const Config& cfg, const std::vector<Result>& results) {
  const double base = results.empty() ? 0 : results.front().rate();
  const unsigned cores = std::thread::hardware_concurrency();
  if (cfg.json) {
    std::printf(
        "{\"benchmark\":\"rocksdb_commit\",\"sync\":%s,\"seconds\":%.3f,\"nproc\":%u,"
        "\"results\":[",
        cfg.sync ? "true" : "false", cfg.seconds, cores);
    for (std::size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::printf(
          "%s{\"clients\":%d,\"commits\":%llu,\"seconds\":%.3f,\"commits_per_s\":%.1f,"
          "\"batches\":%llu,\"commits_per_batch\":%.2f,\"mean_latency_us\":%.1f,"
          "\"p99_latency_us\":%.1f,\"speedup\":%.2f}",
          i == 0 ? "" : ",", r.clients, static_cast<unsigned long long>(r.commits), r.seconds,
          r.rate(), static_cast<unsigned long long>(r.batches),
          r.batches ? static_cast<double>(r.commits) / static_cast<double>(r.batches) : 0.0,
          r.mean_latency_us, r.p99_latency_us, base > 0 ? r.rate() / base : 0.0);
    }
    std::printf("]}\n");
  } else {
    std::printf("rocksdb engine, sync=%s, %.1f s per point, nproc=%u, dir=%s\n",
                cfg.sync ? "true" : "false", cfg.seconds, cores, cfg.dir.c_str());
    std::printf("%8s %10s %12s %10s %14s %12s %12s %8s\n", "clients", "commits", "commits/s",
                "batches", "commits/batch", "mean_us", "p99_us", "speedup");
    for (const Result& r : results) {
      std::printf("%8d %10llu %12.1f %10llu %14.2f %12.1f %12.1f %8.2f\n", r.clients,
                  static_cast<unsigned long long>(r.commits), r.rate(),
                  static_cast<unsigned long long>(r.batches),
                  r.batches ? static_cast<double>(r.commits) / static_cast<double>(r.batches) : 0.0,
                  r.mean_latency_us, r.p99_latency_us, base > 0 ? r.rate() / base : 0.0);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Errors: kvq::Error ("name (code): message"), the directory.
  return kvq::bench_args::run_main("rocksdb_bench", kUsage, [&] {
    const Config cfg = parse(argc, argv);
    std::vector<Result> results;
    for (int clients : cfg.clients) results.push_back(run_one(cfg, clients));
    print_results(cfg, results);
    return 0;
  });
}
