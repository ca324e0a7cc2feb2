// FairQueue pop throughput against Queue's (issue 15): 1 and 32 clients popping, plain, in
// high-contention mode (-hc), and with flat combining (-comb), with 1 tenant and with 10,000
// tenants (the FairQueue's items spread evenly over them; a Queue has no tenants, so its row is the
// same workload without them), a worker's cycle (-take: take under a lease, then ack), and
// queues-rr: 10,000 plain Queues holding the same items, popped in
// turn (a fair pop's least work: one tenant's items per pop, 10,000 places apart in the store,
// with no ring to keep). Each measurement runs on a fresh memory: database prefilled with
// 400,000 items, then 1,000 pops of warm-up (other URLs: 4,000 items, 300 pops, in a fresh
// subspace); a run that drains them is timed to its last pop.
//   fair_bench [SECONDS [URL [STRUCTURE [TENANTS [CLIENTS [PROCESSES]]]]]] (kUsage below says
//   what each takes). STRUCTURE, TENANTS, CLIENTS run only the matching rows, e.g. to profile one
//   of them; a tenant count other than 1 and 10,000 runs the FairQueue rows with that many
//   tenants. PROCESSES P > 1, on etcd only: the row's clients are P worker processes, each
//   with CLIENTS threads and its own connection, popping the one prefilled structure; they
//   start together after the prefill, and the row reports P x CLIENTS clients, all their pops
//   over the longest worker's time, and their CPU time.
// Prints one row per measurement: structure, mode, tenants, clients, pops/s, retries per pop, and
// CPU µs per pop (the whole process's CPU time while the clients popped, over the pops).
// Exit status: 0 done, 1 a kvq error or a failed worker, 2 bad arguments (nothing was measured).
#include <signal.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kvq/kvq.h"
#include "tools/kvq/bench_args.h"
#include "tools/kvq/cli.h"  // CliError
#include "tools/kvq/worker_group.h"

namespace {

using kvq::bench_args::UsageError;

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

// What one measuring process reports: its pops, their retries, its time (until its last client
// stopped: a run that drains the structure is not diluted by the idle rest) and CPU time.
struct Report {
  std::int64_t pops = 0;
  std::int64_t retries = 0;
  double elapsed = 0;
  double cpu_seconds = 0;
};

// `clients` threads running `pop` for `seconds` or until the structure is drained (retries left
// at 0: measure_here counts them). Throws the first exception a pop threw, after stopping the
// other threads.
Report measure(const PopFn& pop, int clients, double seconds) {
  std::atomic<bool> stop{false};
  kvq::bench_args::FirstError error(stop);
  std::atomic<std::int64_t> ops{0};
  std::atomic<int> running{clients};
  std::vector<Clock::time_point> ends(static_cast<std::size_t>(clients));
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  const double cpu_start = process_cpu_seconds();
  for (std::size_t c = 0; c < ends.size(); ++c) {
    threads.emplace_back([&, c] {
      error.run([&] {
        while (!stop.load() && pop()) ++ops;
      });
      ends[c] = Clock::now();
      --running;
    });
  }
  const auto deadline = start + std::chrono::duration<double>(seconds);
  while (Clock::now() < deadline && running.load() > 0 && !stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  for (auto& t : threads) t.join();
  error.rethrow();
  const auto last = *std::max_element(ends.begin(), ends.end());
  const double elapsed = std::chrono::duration<double>(last - start).count();
  return {ops.load(), 0, elapsed, process_cpu_seconds() - cpu_start};
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

// A worker's cycle on a Queue or a FairQueue: take the next item under a lease, ack it (two
// transactions); false if nothing was ready.
template <typename WorkQueue>
bool take_and_ack(WorkQueue& queue) {
  std::optional<kvq::Lease> lease = queue.take(std::chrono::seconds(30));
  if (!lease) return false;
  queue.ack(*lease);
  return true;
}

// The structure `kind` over `space` of `db` (the FairQueue's items spread over `tenants`).
Structure open_structure(const std::shared_ptr<kvq::Database>& db, const kvq::Subspace& space,
                         const std::string& kind, int tenants) {
  if (kind == "queues-rr") return round_robin(db, space, tenants);
  if (kind.starts_with("fair")) {
    kvq::FairQueueOptions fo;
    fo.combine = kind == "fair-comb";
    fo.high_contention = kind == "fair-hc";
    auto fq = std::make_shared<kvq::FairQueue>(db, space, fo);
    PopFn pop = [fq] { return fq->pop().has_value(); };
    if (kind == "fair-take") pop = [fq] { return take_and_ack(*fq); };
    return {[fq, tenants](kvq::Transaction& tr, int i, const std::string& value) {
              fq->push(tr, "tenant-" + std::to_string(i % tenants), value);
            },
            pop};
  }
  kvq::QueueOptions qo;
  qo.high_contention = kind == "queue-hc";
  qo.combine = kind == "queue-comb";
  auto q = std::make_shared<kvq::Queue>(db, space, qo);
  PopFn pop = [q] { return q->pop().has_value(); };
  if (kind == "queue-take") pop = [q] { return take_and_ack(*q); };
  return {[q](kvq::Transaction& tr, int, const std::string& value) { q->push(tr, value); }, pop};
}

// The subspace of a row's structure: its own per row (a shared server keeps what earlier rows
// left), named by `stamp`.
kvq::Subspace row_space(const std::string& kind, std::int64_t stamp) {
  return kvq::Subspace(kvq::Tuple().append("fair_bench").append(kind).append(stamp));
}

// Measures `pop` in this process, counting the retries of `db`.
Report measure_here(kvq::Database& db, const PopFn& pop, int clients, double seconds) {
  const auto before = db.stats().retries;
  Report r = measure(pop, clients, seconds);
  r.retries = static_cast<std::int64_t>(db.stats().retries - before);
  return r;
}

// How long the workers may take to open the database and report ready, and to finish after the
// measurement's time (a pop in flight when time is up may take a while).
constexpr std::chrono::seconds kWorkerStartTimeout{60};
constexpr std::chrono::seconds kWorkerFinishMargin{120};

// Runs `processes` copies of this program as workers (worker_main) on the row's structure,
// started together (kvq::cli::WorkerGroup, as `kvq bench --processes`), and sums their reports
// (the longest time).
Report measure_in_processes(const std::string& url, const std::string& kind, int tenants,
                            std::int64_t stamp, int clients, int processes, double seconds) {
  char seconds_text[32];
  std::snprintf(seconds_text, sizeof seconds_text, "%.17g", seconds);
  const std::vector<std::string> argv = {"/proc/self/exe",
                                         "--worker",
                                         seconds_text,
                                         url,
                                         kind,
                                         std::to_string(tenants),
                                         std::to_string(clients),
                                         std::to_string(stamp)};
  kvq::cli::WorkerGroup workers(std::vector(static_cast<std::size_t>(processes), argv),
                                "fair_bench");
  workers.start_together(kWorkerStartTimeout);
  const auto measured =
      std::chrono::ceil<std::chrono::seconds>(std::chrono::duration<double>(seconds));
  Report sum;
  for (const std::string& text : workers.finish(measured + kWorkerFinishMargin)) {
    Report r;
    if (std::sscanf(text.c_str(), "%" SCNd64 " %" SCNd64 " %lf %lf", &r.pops, &r.retries,
                    &r.elapsed, &r.cpu_seconds) != 4) {
      throw kvq::cli::CliError(kvq::cli::kExitError,
                               "fair_bench: a worker's report is not valid: " + text);
    }
    sum.pops += r.pops;
    sum.retries += r.retries;
    sum.elapsed = std::max(sum.elapsed, r.elapsed);
    sum.cpu_seconds += r.cpu_seconds;
  }
  return sum;
}

// The bounds of the arguments: as `kvq bench`'s --seconds, --clients and --processes; at most
// one tenant per prefilled item.
constexpr double kMaxSeconds = 3600;
constexpr int kMaxClients = 4096;
constexpr int kMaxProcesses = 256;
constexpr int kMaxTenants = kItems;

// The structures the table measures, in its order.
constexpr std::array<std::string_view, 9> kKinds = {"queue",      "queue-hc",  "queue-comb",
                                                    "queue-take", "queues-rr", "fair",
                                                    "fair-hc",    "fair-comb", "fair-take"};

// Whether a row of `kind` spreads its items over tenants (a Queue row has none: 1 tenant).
bool has_tenants(std::string_view kind) { return kind.starts_with("fair") || kind == "queues-rr"; }

// `kind`, if it is one of kKinds; throws UsageError naming `name` otherwise.
std::string checked_kind(std::string_view name, std::string_view kind) {
  if (std::find(kKinds.begin(), kKinds.end(), kind) != kKinds.end()) return std::string(kind);
  std::string kinds;
  for (std::string_view k : kKinds) kinds += std::string(k) + ", ";
  throw UsageError(std::string(name) + ": '" + std::string(kind) + "' is not one of " + kinds +
                   "all");
}

// A worker process of measure_in_processes: opens the row's structure, prefilled by its parent,
// prints "ready", waits for the start byte on stdin, measures, and prints its report.
int worker_main(char** argv) {
  using kvq::bench_args::parse_int;
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // killed with its parent
  const double seconds = kvq::bench_args::parse_number("worker SECONDS", argv[2], 0, kMaxSeconds);
  const std::string url = argv[3], kind = checked_kind("worker STRUCTURE", argv[4]);
  const int tenants = parse_int("worker TENANTS", argv[5], 1, kMaxTenants);
  const int clients = parse_int("worker CLIENTS", argv[6], 1, kMaxClients);
  const std::int64_t stamp = kvq::bench_args::parse_int64("worker STAMP", argv[7], 0, INT64_MAX);
  auto db = kvq::bench_args::open_url("worker URL", url);
  const Structure s = open_structure(db, row_space(kind, stamp), kind, tenants);
  std::printf("ready\n");
  std::fflush(stdout);
  char go = 0;
  if (read(STDIN_FILENO, &go, 1) != 1) {
    std::fprintf(stderr, "fair_bench: worker: stdin closed before the start signal\n");
    return 1;
  }
  const Report r = measure_here(*db, s.pop, clients, seconds);
  std::printf("%" PRId64 " %" PRId64 " %.6f %.6f\n", r.pops, r.retries, r.elapsed, r.cpu_seconds);
  return 0;
}

void row(const std::string& url, const std::string& kind, int tenants, int clients, int processes,
         double seconds) {
  auto db = kvq::open(url);
  const auto stamp = static_cast<std::int64_t>(Clock::now().time_since_epoch().count());
  const Structure s = open_structure(db, row_space(kind, stamp), kind, tenants);
  const bool in_memory = url.starts_with("memory:");
  prefill(*db, s.push, in_memory ? kItems : kItemsOnDisk,
          in_memory ? kPerTransaction : kPerTransactionOnDisk);
  // Warm-up: the first pops of a FairQueue file the tenants the prefill woke (16 per pop); measure
  // the steady state after them.
  for (int i = 0; i < (in_memory ? kWarmUpPops : kWarmUpPopsOnDisk); ++i) s.pop();
  const Report r =
      processes > 1 ? measure_in_processes(url, kind, tenants, stamp, clients, processes, seconds)
                    : measure_here(*db, s.pop, clients, seconds);
  const double pops = static_cast<double>(r.pops);
  std::printf("%-9s %8d %8d %12.0f %10.3f %10.2f\n", kind.c_str(), has_tenants(kind) ? tenants : 0,
              clients * processes, r.elapsed > 0 ? pops / r.elapsed : 0.0,
              pops > 0 ? static_cast<double>(r.retries) / pops : 0.0,
              pops > 0 ? r.cpu_seconds * 1e6 / pops : 0.0);
  std::fflush(stdout);
}

constexpr const char* kUsage =
    "usage: fair_bench [SECONDS [URL [STRUCTURE [TENANTS [CLIENTS [PROCESSES]]]]]]\n"
    "  SECONDS    time per measurement, a decimal number 0..3600 (default 1; 0: the prefill and\n"
    "             warm-up only)\n"
    "  URL        the database (default memory:)\n"
    "  STRUCTURE  queue, queue-hc, queue-comb, queue-take, queues-rr, fair, fair-hc, fair-comb,\n"
    "             fair-take, or all (default); -take rows take and ack (two transactions) where\n"
    "             the others pop\n"
    "  TENANTS    1..400000, or all (default: 1 and 10000); the queue rows have 1\n"
    "  CLIENTS    client threads per process, 1..4096, or all (default: 1 and 32)\n"
    "  PROCESSES  1..256 (default 1); more than 1 (etcd only) runs each row's clients in that\n"
    "             many worker processes\n"
    "Exit status: 0 done, 1 a kvq error or a failed worker, 2 bad arguments.\n";

// The command line: what to measure. "" (kind) and 0 (tenants, clients): every row's.
struct Args {
  double seconds = 1.0;
  std::string url = "memory:";
  std::string kind;
  int tenants = 0;
  int clients = 0;
  int processes = 1;
};

// Throws UsageError naming the argument that is not what kUsage says.
Args parse_args(int argc, char** argv) {
  using kvq::bench_args::parse_int;
  if (argc > 7) throw UsageError("unexpected argument '" + std::string(argv[7]) + "'");
  Args a;
  const auto given = [&](int i) { return argc > i && std::string_view(argv[i]) != "all"; };
  if (argc > 1) a.seconds = kvq::bench_args::parse_number("SECONDS", argv[1], 0, kMaxSeconds);
  if (argc > 2) a.url = argv[2];
  if (given(3)) a.kind = checked_kind("STRUCTURE", argv[3]);
  if (given(4)) a.tenants = parse_int("TENANTS", argv[4], 1, kMaxTenants);
  if (given(5)) a.clients = parse_int("CLIENTS", argv[5], 1, kMaxClients);
  if (argc > 6) a.processes = parse_int("PROCESSES", argv[6], 1, kMaxProcesses);
  if (!a.kind.empty() && !has_tenants(a.kind) && a.tenants > 1) {
    throw UsageError("TENANTS: " + a.kind + " has no tenants: give 1 or all, not " +
                     std::to_string(a.tenants));
  }
  if (a.kind == "queues-rr" && a.tenants == 1) {
    throw UsageError("TENANTS: queues-rr needs 2 or more tenants (with 1 it is the queue row)");
  }
  if (a.processes > 1 && !a.url.starts_with("etcd://") && !a.url.starts_with("etcds://")) {
    throw UsageError("PROCESSES " + std::to_string(a.processes) +
                     ": several processes need a server (etcd:// or etcds://), not " + a.url);
  }
  return a;
}

// One row of the table.
struct RowSpec {
  std::string_view kind;
  int tenants = 0;
  int clients = 0;
};

// The rows `a` selects, in the table's order.
std::vector<RowSpec> selected_rows(const Args& a) {
  const std::vector<int> client_counts = a.clients ? std::vector{a.clients} : std::vector{1, 32};
  // A tenant count given on the command line replaces the two the table compares.
  const std::vector<int> tenant_counts =
      a.tenants ? std::vector{a.tenants} : std::vector{1, 10'000};
  std::vector<RowSpec> rows;
  for (int clients : client_counts) {
    for (std::string_view kind : kKinds) {
      if (!a.kind.empty() && kind != a.kind) continue;
      for (int tenants : has_tenants(kind) ? tenant_counts : std::vector{1}) {
        if (tenants == 1 && kind == "queues-rr") continue;  // that is `queue`
        if (a.tenants == 0 || tenants == a.tenants) rows.push_back({kind, tenants, clients});
      }
    }
  }
  return rows;
}

int run_table(const Args& a) {
  const std::vector<RowSpec> rows = selected_rows(a);
  if (rows.empty()) throw UsageError("no row has the STRUCTURE and TENANTS given");
  kvq::bench_args::open_url("URL", a.url);  // a URL kvq cannot read fails before the header
  std::printf("%-9s %8s %8s %12s %10s %10s\n", "structure", "tenants", "clients", "pops/s",
              "retries/op", "cpu_us/op");
  for (const RowSpec& r : rows) {
    row(a.url, std::string(r.kind), r.tenants, r.clients, a.processes, a.seconds);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 8 && std::string_view(argv[1]) == "--worker") return worker_main(argv);
    for (int i = 1; i < argc; ++i) {
      if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
        std::printf("%s", kUsage);
        return 0;
      }
    }
    return run_table(parse_args(argc, argv));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "fair_bench: %s (see fair_bench --help)\n", e.what());
    return 2;
  } catch (const kvq::cli::CliError& e) {  // a worker failed; the message names fair_bench
    std::fprintf(stderr, "%s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {  // kvq::Error: "name (code): message"
    std::fprintf(stderr, "fair_bench: %s\n", e.what());
    return 1;
  }
}
