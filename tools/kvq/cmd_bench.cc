// `kvq bench`: push and pop throughput by client count, plain vs high-contention pops, for Queue
// and PriorityQueue. Each measurement uses a fresh database (memory:) or a fresh subspace.
// With --processes, each measurement runs in worker processes (this binary re-executed with the
// hidden --worker option, worker_group.h) that start together on the subspace the parent prefilled.
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kvq/kvq.h"
#include "tools/kvq/bench_args.h"
#include "tools/kvq/bench_clients.h"
#include "tools/kvq/commands.h"
#include "tools/kvq/plot.h"
#include "tools/kvq/worker_group.h"

namespace kvq::cli {
namespace {

struct Row {
  std::string kind, mode, op;
  int processes = 1;
  int clients = 0;  // client threads of all processes
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

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::size_t i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

// Fills the rates of `r` from the run and the counters' differences `c`.
void fill_rates(Row& r, Run& run, const Counters& c) {
  const auto per = [](double n, double d) { return d > 0 ? n / d : 0.0; };
  r.ops = static_cast<std::int64_t>(run.latencies_us.size());
  r.seconds = run.seconds;
  const double ops = static_cast<double>(r.ops);
  r.ops_per_s = per(ops, run.seconds);
  r.cpu_us_per_op = per(run.cpu_seconds * 1e6, ops);
  r.retries_per_op = per(static_cast<double>(c.retries), ops);
  r.conflicts_per_op = per(static_cast<double>(c.conflicts), ops);
  const double staged = static_cast<double>(c.staged);
  const double batches = static_cast<double>(c.batches);
  r.staged_share = per(staged, staged + static_cast<double>(c.fast));
  r.batch_size = per(static_cast<double>(c.served), batches);
  r.batch_conflicts = per(static_cast<double>(c.batch_conflicts), batches);
  r.p50_us = percentile(run.latencies_us, 0.50);
  r.p99_us = percentile(run.latencies_us, 0.99);
}

// One row to measure: the structure, pop mode and operation, the client threads of each process,
// and the number that names its fresh subspace.
struct Point {
  std::string kind, mode, op;
  int threads = 0;
  int seq = 0;
};

// How long the workers of --processes may take to open the database and report ready, and to
// finish after the measurement's time (a pop in flight when time is up may take a while).
constexpr std::chrono::seconds kWorkerStartTimeout{60};
constexpr std::chrono::seconds kWorkerFinishMargin{120};

// The command line of a worker process measuring `p`: this kvq, with --worker.
std::vector<std::string> worker_argv(const BenchOptions& o, const Point& p) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.17g", o.seconds);
  std::vector<std::string> argv{"/proc/self/exe",
                                "--db",
                                o.url,
                                "bench",
                                "--worker",
                                std::to_string(p.seq),
                                "--kinds",
                                p.kind,
                                "--modes",
                                p.mode,
                                "--ops",
                                p.op,
                                "--clients",
                                std::to_string(p.threads),
                                "--seconds",
                                seconds,
                                "--batch-size",
                                std::to_string(o.batch_size)};
  if (o.combine) argv.emplace_back("--combine");
  if (o.favor_latency) argv.emplace_back("--favor-latency");
  return argv;
}

// Runs `p` in o.processes worker processes started together; the sum of their tallies.
Tally run_processes(const BenchOptions& o, const Point& p) {
  WorkerGroup workers(std::vector(static_cast<std::size_t>(o.processes), worker_argv(o, p)),
                      "bench");
  workers.start_together(kWorkerStartTimeout);
  const auto measured =
      std::chrono::ceil<std::chrono::seconds>(std::chrono::duration<double>(o.seconds));
  Tally total;
  for (const std::string& report : workers.finish(measured + kWorkerFinishMargin)) {
    try {
      total += nlohmann::json::parse(report).get<Tally>();
    } catch (const nlohmann::json::exception& e) {
      throw CliError(kExitError, std::string("bench: a worker's report is not valid: ") + e.what());
    }
  }
  return total;
}

// `kvq bench --worker SEQ`, a worker of --processes: opens the point its options name on the
// subspace its parent prefilled, prints "ready", waits for one byte on stdin, runs, and prints its
// tally as one line of JSON.
int run_worker(const BenchOptions& o) {
  // A worker does not outlive its parent: killed with it (and if the parent died before this,
  // stdin is closed and the worker stops at the start signal).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const Point p{o.kinds.front(), o.modes.front(), o.ops.front(), o.clients.front(), o.worker};
  auto db = kvq::open(o.url);
  Target t(db, o, p.kind, p.mode, p.seq);
  std::printf("ready\n");
  std::fflush(stdout);
  char go = 0;
  if (read(STDIN_FILENO, &go, 1) != 1) {
    throw CliError(kExitError, "bench: worker: stdin closed before the start signal");
  }
  std::cout << nlohmann::json(run_threads(o, *db, t, p.op, p.threads)).dump() << "\n";
  return kExitOk;
}

Row make_row(const BenchOptions& o, const Point& p, Tally& tally) {
  Row r;
  r.kind = p.kind;
  r.mode = o.favor_latency ? p.mode + "+cl" : o.combine ? p.mode + "+c" : p.mode;
  r.op = p.op;
  r.processes = o.processes;
  r.clients = p.threads * o.processes;
  fill_rates(r, tally.run, tally.counters);
  if (tally.run.drained && p.op != "push") {
    std::fprintf(stderr, "kvq bench: note: %s %s %s at %d clients drained the %d prefilled items\n",
                 p.kind.c_str(), p.mode.c_str(), p.op.c_str(), r.clients, o.prefill);
  }
  return r;
}

// Measures `p` on a fresh subspace, prefilled for pops: in this process, or in o.processes.
Row measure(const BenchOptions& o, const Point& p) {
  auto db = kvq::open(o.url);
  Target t(db, o, p.kind, p.mode, p.seq);
  if (p.op != "push" && p.op != "flow") prefill(t, o.prefill);
  Tally tally = o.processes > 1 ? run_processes(o, p) : run_threads(o, *db, t, p.op, p.threads);
  return make_row(o, p, tally);
}

// --processes > 1 needs a database that several processes share: etcd. memory: lives in one
// process, and a RocksDB directory is locked by the process that opened it.
void check_processes(const BenchOptions& o) {
  if (o.processes == 1 || o.url.rfind("etcd://", 0) == 0 || o.url.rfind("etcds://", 0) == 0) {
    return;
  }
  throw CliError(kExitUsage, "bench: --processes " + std::to_string(o.processes) +
                                 " needs a database several processes share (etcd:// or "
                                 "etcds://); memory: and rocksdb: belong to one process");
}

// True if `program` is an executable file in a directory of $PATH (as the shell that runs it finds
// it).
bool on_path(const std::string& program) {
  const char* env = std::getenv("PATH");
  const std::string_view dirs = env != nullptr && *env != '\0' ? env : "/usr/bin:/bin";
  for (std::size_t pos = 0; pos <= dirs.size();) {
    const std::size_t colon = std::min(dirs.find(':', pos), dirs.size());
    const std::string_view dir = dirs.substr(pos, colon - pos);
    const std::string file = (dir.empty() ? std::string(".") : std::string(dir)) + "/" + program;
    struct stat st {};
    if (stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(file.c_str(), X_OK) == 0) {
      return true;
    }
    pos = colon + 1;
  }
  return false;
}

// --plot: refuses, before anything is measured, a PNG file that could not be written (a usage
// error) and a missing gnuplot.
void check_plot(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path file(path);
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  std::error_code ec;
  if (fs::is_directory(file, ec)) {
    throw CliError(kExitUsage, "bench: --plot " + path + " is a directory, not a PNG file");
  }
  if (!fs::is_directory(dir, ec)) {
    throw CliError(kExitUsage, "bench: --plot " + path + ": no directory " + dir.string());
  }
  const fs::path written = fs::exists(file, ec) ? file : dir;
  if (access(written.c_str(), W_OK) != 0) {
    throw CliError(kExitUsage, "bench: --plot " + path + ": cannot write " + written.string() +
                                   " (" + std::strerror(errno) + ")");
  }
  if (!on_path("gnuplot")) {
    throw CliError(kExitError, "bench: --plot needs gnuplot (apt install gnuplot-nox)");
  }
}

void print_header() {
  std::printf("%-6s %-8s %-5s %5s %7s %10s %10s %12s %9s %9s %8s %7s %6s %8s\n", "kind", "mode",
              "op", "procs", "clients", "ops/s", "retries/op", "conflicts/op", "p50 us", "p99 us",
              "cpu us/op", "staged", "batch", "bconf/b");
}

void print_row(const Row& r) {
  std::printf("%-6s %-8s %-5s %5d %7d %10.0f %10.3f %12.3f %9.1f %9.1f %8.1f %6.0f%% %6.1f %8.3f\n",
              r.kind.c_str(), r.mode.c_str(), r.op.c_str(), r.processes, r.clients, r.ops_per_s,
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
  j["favor_latency"] = o.favor_latency;
  j["processes"] = o.processes;
  j["nproc"] = std::thread::hardware_concurrency();
  j["results"] = nlohmann::json::array();
  for (const auto& r : rows) {
    j["results"].push_back({{"kind", r.kind},
                            {"mode", r.mode},
                            {"op", r.op},
                            {"processes", r.processes},
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
  if (o.worker >= 0) return run_worker(o);
  check_processes(o);
  if (!o.plot.empty()) check_plot(o.plot);
  std::vector<Row> rows;
  int seq = 0;
  if (!o.json) print_header();
  for (const auto& op : o.ops) {
    for (const auto& kind : o.kinds) {
      for (const auto& mode : o.modes) {
        if (skipped(o, op, mode)) continue;
        for (int c : o.clients) {
          rows.push_back(measure(o, Point{kind, mode, op, c, seq++}));
          if (!o.json) print_row(rows.back());
        }
      }
    }
  }
  if (o.json) print_json(o, rows);
  if (!o.plot.empty()) plot_rows(o, rows);
  return kExitOk;
}

namespace {

// A CLI11 transform: a decimal integer in [min, max] (kvq::bench_args: CLI11's own conversion
// would read "0x10" as 16 and "010" as 8), left in its plain decimal form.
CLI::Validator DecimalInt(int min, int max) {
  return CLI::Validator(
      [min, max](std::string& s) -> std::string {
        long long v = 0;
        std::string why = kvq::bench_args::integer_error(s, min, max, v);
        if (why.empty()) s = std::to_string(v);
        return why;
      },
      "INT in [" + std::to_string(min) + " - " + std::to_string(max) + "]");
}

// A CLI11 transform: a time in seconds, a decimal number (not hex, inf or nan) with an optional
// unit ms, s or m, from 0.01 s to 1 hour; left as its seconds in the shortest decimal form.
CLI::Validator DecimalSeconds() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::string_view number = s;
        double scale = 1;
        if (number.ends_with("ms")) {
          scale = 0.001;
          number.remove_suffix(2);
        } else if (number.ends_with('s') || number.ends_with('m')) {
          scale = number.ends_with('m') ? 60 : 1;
          number.remove_suffix(1);
        }
        double v = 0;
        const double max = std::numeric_limits<double>::max();
        if (!kvq::bench_args::number_error(number, 0, max, v).empty()) {
          return "'" + s + "' is not a decimal number >= 0 with an optional unit (0.5, 300ms, 2s)";
        }
        v *= scale;
        if (v < 0.01 || v > 3600) return "'" + s + "' is out of range (10ms..3600s)";
        char text[32];
        s.assign(text, std::to_chars(text, text + sizeof text, v).ptr);
        return {};
      },
      "DURATION in [10ms - 3600s]");
}

// Adds --clients: lists of client counts, each a decimal integer in 1..4096, separated by single
// commas (CLI11's delimiter would silently drop the empty item of "1,,2").
void add_clients_option(CLI::App* bench, BenchOptions* o) {
  std::string defaults;
  for (int c : o->clients) defaults += (defaults.empty() ? "" : ",") + std::to_string(c);
  bench
      ->add_option_function<std::vector<std::string>>(
          "--clients",
          [o](const std::vector<std::string>& lists) {
            if (lists.empty()) throw CLI::ValidationError("--clients", "must not be empty");
            o->clients.clear();
            for (const std::string& list : lists) {
              std::vector<int> counts;
              std::string why = kvq::bench_args::int_list_error(list, 1, 4096, counts);
              if (!why.empty()) throw CLI::ValidationError("--clients", why);
              o->clients.insert(o->clients.end(), counts.begin(), counts.end());
            }
          },
          "comma-separated client counts (1..4096)")
      ->type_name("INT,...")
      ->default_str(defaults);
}

// The options that say what is measured: client counts, time, structures, modes, operations.
void add_workload_options(CLI::App* bench, BenchOptions* o) {
  add_clients_option(bench, o);
  bench->add_option("--seconds", o->seconds, "time per measurement: 0.5, 300ms, 2s")
      ->transform(DecimalSeconds())
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
                   "comma-separated: push,pop,take,cycle,flow (take = take + ack; cycle = pop "
                   "and push back, keeping the queue at --prefill items; flow = one client in "
                   "four pushes, the others pop with pop_wait(100ms), from an empty queue)")
      ->delimiter(',')
      ->check(CLI::IsMember({"push", "pop", "take", "cycle", "flow"}))
      ->capture_default_str();
  bench
      ->add_option("--prefill", o->prefill,
                   "items pushed before each pop, take or cycle measurement")
      ->transform(DecimalInt(1, 100000000))
      ->capture_default_str();
}

// The options that say how the clients run: the queue options, processes, output.
void add_run_options(CLI::App* bench, BenchOptions* o) {
  bench
      ->add_option("--batch-size", o->batch_size,
                   "high-contention requests served per fulfilment transaction")
      ->transform(DecimalInt(1, 10000))
      ->capture_default_str();
  CLI::Option* combine =
      bench->add_flag("--combine", o->combine,
                      "flat combining: threads of this process share push / pop transactions");
  bench
      ->add_flag("--favor-latency", o->favor_latency,
                 "with --combine: a leader about to serve alone after a group first yields its "
                 "core to the threads it woke (lower tail latency, fewer ops/s)")
      ->needs(combine);
  bench
      ->add_option("--processes", o->processes,
                   "run each measurement in this many processes, each with --clients threads and "
                   "its own connection, started together (etcd only); clients = processes x "
                   "threads")
      ->transform(DecimalInt(1, 256))
      ->capture_default_str();
  bench->add_option("--worker", o->worker, "a worker process of --processes")
      ->transform(DecimalInt(0, std::numeric_limits<int>::max()))
      ->group("");
  bench->add_flag("--json", o->json, "print JSON instead of a table");
  bench->add_option("--plot", o->plot, "also draw ops/s against clients into this PNG (gnuplot)");
}

}  // namespace

void add_bench_command(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<BenchOptions>();
  auto* bench = app.add_subcommand(
      "bench", "contention benchmark: push/pop ops/s, retries/op, p50/p99 by client count");
  add_workload_options(bench, o.get());
  add_run_options(bench, o.get());
  set_action(bench, ctx, [&ctx, o] {
    o->url = ctx.url_or_memory();
    return run_bench(*o);
  });
}

}  // namespace kvq::cli
