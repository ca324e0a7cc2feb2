#include "tools/kvq/bench_clients.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <random>
#include <thread>

#include "layers/item_store.h"
#include "tools/kvq/bench_args.h"  // FirstError

namespace kvq::cli {
namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// The visibility timeout of `take` measurements: longer than any measurement.
constexpr std::chrono::milliseconds kBenchVt{600'000};

void push_one(Target& t, std::mt19937& gen, const std::string& value) {
  if (t.is_pq) {
    t.pq.push(value, static_cast<std::int64_t>(gen() % 100));
  } else {
    t.q.push(value);
  }
}

// Pops one item (priority queues: pop_min and pop_max in turn); nullopt if the queue is empty.
std::optional<std::string> pop_one(Target& t, bool max) {
  if (!t.is_pq) return t.q.pop();
  return max ? t.pq.pop_max() : t.pq.pop_min();
}

// How long a "flow" consumer's pop waits for an item.
constexpr std::chrono::milliseconds kFlowWait{100};

// A blocking pop of a "flow" consumer; a wait that ended without an item is an operation too.
void pop_waiting(Target& t, bool max) {
  if (!t.is_pq) {
    t.q.pop_wait(kFlowWait);
  } else if (max) {
    t.pq.pop_max_wait(kFlowWait);
  } else {
    t.pq.pop_min_wait(kFlowWait);
  }
}

// One operation of client `c`'s `n`th iteration; false if a pop or take found the queue empty.
// "cycle" pops an item and pushes it back, so the queue keeps its depth (the prefill). "flow":
// one client in four pushes, the others pop with pop_wait, so the queue stays as short as
// consumers that outnumber the producers keep it (pops wait for pushes, as job workers do).
bool one_op(Target& t, const std::string& op, int c, std::uint64_t n, std::mt19937& gen,
            const std::string& value) {
  if (op == "push" || (op == "flow" && c % 4 == 0)) {
    push_one(t, gen, value);
    return true;
  }
  const bool max = (n + static_cast<std::uint64_t>(c)) % 2 != 0;
  if (op == "flow") {
    pop_waiting(t, max);
    return true;
  }
  if (op == "cycle") {
    auto v = pop_one(t, max);
    if (v) push_one(t, gen, *v);
    return v.has_value();
  }
  if (op == "take" && !t.is_pq) {  // take + ack: the work-queue round trip (two transactions)
    auto lease = t.q.take(kBenchVt);
    if (lease) t.q.ack(*lease);
    return lease.has_value();
  }
  if (op == "take") {
    auto lease = max ? t.pq.take_max(kBenchVt) : t.pq.take_min(kBenchVt);
    if (lease) t.pq.ack(*lease);
    return lease.has_value();
  }
  return pop_one(t, max).has_value();
}

// Client `c` of run_clients: runs `op` until `stop`, keeping each operation's latency (µs) in
// `lat`; sets `drained` (and `stop`) when a pop finds the queue empty.
void run_client(Target& t, const std::string& op, int c, std::atomic<bool>& stop,
                std::atomic<bool>& drained, std::vector<double>& lat) {
  std::mt19937 gen(static_cast<unsigned>(c + 1));
  const std::string value(16, 'v');
  // Every client runs at least one operation, even if it was scheduled only after the time was
  // up (a loaded machine, a short --seconds): a row always has a rate and latencies.
  for (std::uint64_t n = 0; n == 0 || !stop.load(std::memory_order_relaxed); ++n) {
    const auto s = std::chrono::steady_clock::now();
    if (!one_op(t, op, c, n, gen, value)) {
      drained = true;
      stop = true;
      break;
    }
    lat.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s).count());
  }
}

// Runs `clients` threads doing `op` for o.seconds (or until the queue drains). Throws the first
// exception an operation threw, after stopping the other threads.
Run run_clients(const BenchOptions& o, Target& t, const std::string& op, int clients) {
  std::atomic<bool> stop{false}, drained{false};
  kvq::bench_args::FirstError error(stop);
  std::vector<std::vector<double>> lat(static_cast<std::size_t>(clients));
  std::vector<std::thread> threads;
  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      error.run([&] { run_client(t, op, c, stop, drained, lat[static_cast<std::size_t>(c)]); });
    });
  }
  const auto limit = std::chrono::duration<double>(o.seconds);
  while (!stop && std::chrono::steady_clock::now() - t0 < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop = true;
  for (auto& th : threads) th.join();
  error.rethrow();
  Run r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu_seconds = cpu_seconds() - cpu0;
  r.drained = drained;
  for (auto& v : lat) r.latencies_us.insert(r.latencies_us.end(), v.begin(), v.end());
  return r;
}

}  // namespace

// Pushes `count` items with push_batch (one read of the queue's end per batch); halves the batch
// if the engine refuses its size (etcd takes at most --max-txn-ops writes per transaction).
void prefill(Target& t, int count) {
  std::mt19937 gen(42);
  int batch = 1000;
  for (int done = 0; done < count;) {
    const int n = std::min(batch, count - done);
    std::vector<std::pair<std::string, std::int64_t>> items;
    for (int i = 0; i < n; ++i) {
      items.emplace_back("item-" + std::to_string(done + i),
                         static_cast<std::int64_t>(gen() % 100));
    }
    try {
      if (t.is_pq) {
        t.pq.push_batch(items);
      } else {
        std::vector<std::string> values;
        for (auto& item : items) values.push_back(std::move(item.first));
        t.q.push_batch(values);
      }
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kTransactionTooLarge || batch == 1) throw;
      batch /= 2;
      continue;
    }
    done += n;
  }
}

Counters Counters::now(const Database& db) {
  const DatabaseStats ds = db.stats();
  const auto& hs = detail::contention_stats();
  return {ds.retries, ds.conflicts,       hs.staged_pops, hs.fast_pops,
          hs.batches, hs.batch_conflicts, hs.served};
}

Counters& Counters::operator+=(const Counters& o) {
  retries += o.retries;
  conflicts += o.conflicts;
  staged += o.staged;
  fast += o.fast;
  batches += o.batches;
  batch_conflicts += o.batch_conflicts;
  served += o.served;
  return *this;
}

Run& Run::operator+=(const Run& o) {
  latencies_us.insert(latencies_us.end(), o.latencies_us.begin(), o.latencies_us.end());
  seconds = std::max(seconds, o.seconds);
  cpu_seconds += o.cpu_seconds;
  drained = drained || o.drained;
  return *this;
}

Tally run_threads(const BenchOptions& o, const Database& db, Target& t, const std::string& op,
                  int threads) {
  const Counters before = Counters::now(db);
  Tally tally;
  tally.run = run_clients(o, t, op, threads);
  tally.counters = Counters::now(db).since(before);
  return tally;
}

}  // namespace kvq::cli
