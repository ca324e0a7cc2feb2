// `kvq bench`: push and pop throughput by client count, plain vs high-contention pops, for Queue
// and PriorityQueue. Each measurement uses a fresh database (memory:) or a fresh subspace.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "kvq/kvq.h"
#include "layers/item_store.h"
#include "tools/kvq/commands.h"
#include "tools/kvq/plot.h"

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

// The structures one measurement runs on, in a fresh subspace.
struct Target {
  Target(std::shared_ptr<Database> db, const BenchOptions& o, const std::string& kind,
         const std::string& mode, int seq)
      : space(Tuple().append("bench").append(seq).append(kind)),
        q(db, space, queue_options(o, mode)),
        pq(db, space, pq_options(o, mode)),
        is_pq(kind == "pq") {}

  static QueueOptions queue_options(const BenchOptions& o, const std::string& mode) {
    QueueOptions qo;
    qo.high_contention = mode == "hc";
    qo.contention.batch_size = o.batch_size;
    qo.combine = o.combine;
    return qo;
  }
  static PriorityQueueOptions pq_options(const BenchOptions& o, const std::string& mode) {
    PriorityQueueOptions po;
    po.high_contention = mode == "hc";
    po.contention.batch_size = o.batch_size;
    po.combine = o.combine;
    return po;
  }

  Subspace space;
  Queue q;
  PriorityQueue pq;
  bool is_pq;
};

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

// The high-contention counters at one moment.
struct ContentionSnapshot {
  ContentionSnapshot() {
    const auto& hs = detail::contention_stats();
    staged = hs.staged_pops;
    fast = hs.fast_pops;
    batches = hs.batches;
    batch_conflicts = hs.batch_conflicts;
    served = hs.served;
  }
  std::uint64_t staged, fast, batches, batch_conflicts, served;
};

// What the client threads of one measurement did.
struct Run {
  std::vector<double> latencies_us;
  double seconds = 0, cpu_seconds = 0;
  bool drained = false;  // a pop found the queue empty (the prefill ran out)
};

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

// One operation of client `c`'s `n`th iteration; false if a pop or take found the queue empty.
// "cycle" pops an item and pushes it back, so the queue keeps its depth (the prefill).
bool one_op(Target& t, const std::string& op, int c, std::uint64_t n, std::mt19937& gen,
            const std::string& value) {
  if (op == "push") {
    push_one(t, gen, value);
    return true;
  }
  const bool max = (n + static_cast<std::uint64_t>(c)) % 2 != 0;
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

// Runs `clients` threads doing `op` for o.seconds (or until the queue drains).
Run run_clients(const BenchOptions& o, Target& t, const std::string& op, int clients) {
  std::atomic<bool> stop{false}, drained{false};
  std::vector<std::vector<double>> lat(static_cast<std::size_t>(clients));
  std::vector<std::thread> threads;
  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937 gen(static_cast<unsigned>(c + 1));
      const std::string value(16, 'v');
      for (std::uint64_t n = 0; !stop.load(std::memory_order_relaxed); ++n) {
        const auto s = std::chrono::steady_clock::now();
        if (!one_op(t, op, c, n, gen, value)) {
          drained = true;
          stop = true;
          break;
        }
        lat[static_cast<std::size_t>(c)].push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s)
                .count());
      }
    });
  }
  const auto limit = std::chrono::duration<double>(o.seconds);
  while (!stop && std::chrono::steady_clock::now() - t0 < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop = true;
  for (auto& th : threads) th.join();
  Run r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu_seconds = cpu_seconds() - cpu0;
  r.drained = drained;
  for (auto& v : lat) r.latencies_us.insert(r.latencies_us.end(), v.begin(), v.end());
  return r;
}

// Fills the rates of `r` from the run and the counters' differences.
void fill_rates(Row& r, Run& run, const DatabaseStats& before, const DatabaseStats& after,
                const ContentionSnapshot& c0, const ContentionSnapshot& c1) {
  const auto per = [](double n, double d) { return d > 0 ? n / d : 0.0; };
  r.ops = static_cast<std::int64_t>(run.latencies_us.size());
  r.seconds = run.seconds;
  const double ops = static_cast<double>(r.ops);
  r.ops_per_s = ops / run.seconds;
  r.cpu_us_per_op = per(run.cpu_seconds * 1e6, ops);
  r.retries_per_op = per(static_cast<double>(after.retries - before.retries), ops);
  r.conflicts_per_op = per(static_cast<double>(after.conflicts - before.conflicts), ops);
  const double staged = static_cast<double>(c1.staged - c0.staged);
  const double fast = static_cast<double>(c1.fast - c0.fast);
  const double batches = static_cast<double>(c1.batches - c0.batches);
  r.staged_share = per(staged, staged + fast);
  r.batch_size = per(static_cast<double>(c1.served - c0.served), batches);
  r.batch_conflicts = per(static_cast<double>(c1.batch_conflicts - c0.batch_conflicts), batches);
  r.p50_us = percentile(run.latencies_us, 0.50);
  r.p99_us = percentile(run.latencies_us, 0.99);
}

Row measure(const BenchOptions& o, const std::string& kind, const std::string& mode,
            const std::string& op, int clients, int seq) {
  auto db = kvq::open(o.url);
  Target t(db, o, kind, mode, seq);
  if (op != "push") prefill(t, o.prefill);
  const DatabaseStats before = db->stats();
  const ContentionSnapshot c0;
  Run run = run_clients(o, t, op, clients);
  const ContentionSnapshot c1;
  Row r;
  r.kind = kind;
  r.mode = o.combine ? mode + "+c" : mode;
  r.op = op;
  r.clients = clients;
  fill_rates(r, run, before, db->stats(), c0, c1);
  if (run.drained && op != "push") {
    std::fprintf(stderr, "kvq bench: note: %s %s %s at %d clients drained the %d prefilled items\n",
                 kind.c_str(), mode.c_str(), op.c_str(), clients, o.prefill);
  }
  return r;
}

void print_header() {
  std::printf("%-6s %-8s %-5s %7s %10s %10s %12s %9s %9s %8s %7s %6s %8s\n", "kind", "mode", "op",
              "clients", "ops/s", "retries/op", "conflicts/op", "p50 us", "p99 us", "cpu us/op",
              "staged", "batch", "bconf/b");
}

void print_row(const Row& r) {
  std::printf("%-6s %-8s %-5s %7d %10.0f %10.3f %12.3f %9.1f %9.1f %8.1f %6.0f%% %6.1f %8.3f\n",
              r.kind.c_str(), r.mode.c_str(), r.op.c_str(), r.clients, r.ops_per_s,
              r.retries_per_op, r.conflicts_per_op, r.p50_us, r.p99_us, r.cpu_us_per_op,
              100 * r.staged_share, r.batch_size, r.batch_conflicts);
  std::fflush(stdout);
}

void print_json(const BenchOptions& o, const std::vector<Row>& rows) {
  nlohmann::json j;
  j["url"] = o.url;
  j["seconds"] = o.seconds;
  j["batch_size"] = o.batch_size;
  j["combine"] = o.combine;
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

// Pushes do not depend on the pop mode: measured once (as "plain") when plain is measured too.
bool skipped(const BenchOptions& o, const std::string& op, const std::string& mode) {
  return op == "push" && mode == "hc" &&
         std::find(o.modes.begin(), o.modes.end(), "plain") != o.modes.end();
}

// One panel per op, one line per kind and mode (as the rows name them), in the order measured.
void plot_rows(const BenchOptions& o, const std::vector<Row>& rows) {
  std::vector<PlotPanel> panels;
  for (const auto& op : o.ops) {
    PlotPanel panel{op + " (" + o.url + ")", {}};
    for (const Row& r : rows) {
      if (r.op != op) continue;
      const std::string title = r.kind + " " + r.mode;
      auto line = std::find_if(panel.lines.begin(), panel.lines.end(),
                               [&](const PlotLine& l) { return l.title == title; });
      if (line == panel.lines.end()) line = panel.lines.insert(line, PlotLine{title, {}});
      line->points.emplace_back(r.clients, r.ops_per_s);
    }
    panels.push_back(std::move(panel));
  }
  plot_png(o.plot, panels, "clients", "ops/s");
}

}  // namespace

int run_bench(const BenchOptions& o) {
  std::vector<Row> rows;
  int seq = 0;
  if (!o.json) print_header();
  for (const auto& op : o.ops) {
    for (const auto& kind : o.kinds) {
      for (const auto& mode : o.modes) {
        if (skipped(o, op, mode)) continue;
        for (int c : o.clients) {
          rows.push_back(measure(o, kind, mode, op, c, seq++));
          if (!o.json) print_row(rows.back());
        }
      }
    }
  }
  if (o.json) print_json(o, rows);
  if (!o.plot.empty()) plot_rows(o, rows);
  return kExitOk;
}

void add_bench_command(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<BenchOptions>();
  auto* bench = app.add_subcommand(
      "bench", "contention benchmark: push/pop ops/s, retries/op, p50/p99 by client count");
  bench->add_option("--clients", o->clients, "comma-separated client counts (1..4096)")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  bench->add_option("--seconds", o->seconds, "time per measurement: 0.5, 300ms, 2s")
      ->transform(DurationSeconds())
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  bench->add_option("--kinds", o->kinds, "comma-separated: queue,pq")
      ->delimiter(',')
      ->check(CLI::IsMember({"queue", "pq"}))
      ->capture_default_str();
  bench->add_option("--modes", o->modes, "comma-separated: plain,hc")
      ->delimiter(',')
      ->check(CLI::IsMember({"plain", "hc"}))
      ->capture_default_str();
  bench
      ->add_option("--ops", o->ops,
                   "comma-separated: push,pop,take,cycle (take = take + ack; cycle = pop and push "
                   "back, keeping the queue at --prefill items)")
      ->delimiter(',')
      ->check(CLI::IsMember({"push", "pop", "take", "cycle"}))
      ->capture_default_str();
  bench
      ->add_option("--prefill", o->prefill,
                   "items pushed before each pop, take or cycle measurement")
      ->check(CLI::Range(1, 100000000))
      ->capture_default_str();
  bench
      ->add_option("--batch-size", o->batch_size,
                   "high-contention requests served per fulfilment transaction")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  bench->add_flag("--combine", o->combine,
                  "flat combining: threads of this process share push / pop transactions");
  bench->add_flag("--json", o->json, "print JSON instead of a table");
  bench->add_option("--plot", o->plot, "also draw ops/s against clients into this PNG (gnuplot)");
  set_action(bench, ctx, [&ctx, o] {
    o->url = ctx.url_or_memory();
    return run_bench(*o);
  });
}

}  // namespace kvq::cli
