// `kvq demo`: producers and consumers on one shared Queue and one shared PriorityQueue, then a
// check of the whole history (tools/kvq/history.h).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "tools/kvq/commands.h"
#include "tools/kvq/history.h"

namespace kvq::cli {
namespace {

using history::flatten;
using history::now_ns;

// The options of the demo's Queue and PriorityQueue (PriorityQueueOptions is QueueOptions).
QueueOptions structure_options(bool high_contention) {
  QueueOptions o;
  o.high_contention = high_contention;
  return o;
}

// Everything the demo's threads share; each client writes only its own history vector.
struct Demo {
  Demo(const DemoOptions& options, std::shared_ptr<Database> database, Subspace space)
      : o(options),
        db(std::move(database)),
        queue(db, space.subspace(Tuple().append("Q")), structure_options(o.high_contention)),
        pq(db, space.subspace(Tuple().append("P")), structure_options(o.high_contention)),
        producers(o.clients / 2),
        consumers(o.clients - producers),
        qpush(producers),
        ppush(producers),
        qpop(consumers),
        ppop(consumers),
        producers_left(producers) {}

  void record_error(const std::exception& e) {
    std::lock_guard<std::mutex> lock(error_mu);
    if (first_error.empty()) first_error = e.what();
    failed = true;
  }

  const DemoOptions& o;
  std::shared_ptr<Database> db;
  Queue queue;
  PriorityQueue pq;
  const int producers, consumers;
  std::vector<std::vector<history::Push>> qpush, ppush;
  std::vector<std::vector<history::Pop>> qpop, ppop;
  std::atomic<std::int64_t> pushed{0}, popped{0};
  std::atomic<int> producers_left;
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  std::string first_error;
};

// Producer p pushes items p, p + producers, ... into both structures, recording each push.
void produce(Demo& d, int p) {
  std::mt19937 gen(static_cast<unsigned>(p * 7919 + 1));
  std::uniform_int_distribution<int> prio(0, 99);
  try {
    for (int i = p; i < d.o.items && !d.failed; i += d.producers) {
      history::Push a{"q" + std::to_string(i), 0, now_ns(), 0};
      d.queue.push(a.value);
      a.end = now_ns();
      d.qpush[p].push_back(std::move(a));
      history::Push b{"p" + std::to_string(i), prio(gen), now_ns(), 0};
      d.pq.push(b.value, b.priority);
      b.end = now_ns();
      d.ppush[p].push_back(std::move(b));
      d.pushed += 2;
    }
  } catch (const std::exception& e) {
    d.record_error(e);
  }
  --d.producers_left;
}

// Consumer c pops both structures (pop_min and pop_max alternating) until the producers are done
// and two rounds in a row found both empty, recording every pop (empty ones too).
void consume(Demo& d, int c) {
  try {
    int empties_after_done = 0;
    for (std::uint64_t n = 0; !d.failed; ++n) {
      const bool done = d.producers_left.load() == 0;
      history::Pop q{history::PopKind::kFifo, std::nullopt, now_ns(), 0};
      q.value = d.queue.pop();
      q.end = now_ns();
      const bool min = (n + static_cast<std::uint64_t>(c)) % 2 == 0;
      history::Pop p{min ? history::PopKind::kMin : history::PopKind::kMax, std::nullopt, now_ns(),
                     0};
      p.value = min ? d.pq.pop_min() : d.pq.pop_max();
      p.end = now_ns();
      d.popped += (q.value ? 1 : 0) + (p.value ? 1 : 0);
      const bool both_empty = !q.value && !p.value;
      d.qpop[c].push_back(std::move(q));
      d.ppop[c].push_back(std::move(p));
      empties_after_done = done && both_empty ? empties_after_done + 1 : 0;
      if (empties_after_done >= 2) break;
    }
  } catch (const std::exception& e) {
    d.record_error(e);
  }
}

// Prints a progress line to stderr every 200 ms until `finished` (nothing if quiet).
void show_progress(Demo& d, const std::atomic<bool>& finished,
                   std::chrono::steady_clock::time_point t0, std::uint64_t conflicts0) {
  const bool tty = isatty(2);
  while (!finished) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (d.o.quiet) continue;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "%s  %5.1fs  pushed %lld/%d  popped %lld  conflicts %llu%s",
                 tty ? "\r" : "", s, static_cast<long long>(d.pushed.load()), 2 * d.o.items,
                 static_cast<long long>(d.popped.load()),
                 static_cast<unsigned long long>(d.db->stats().conflicts - conflicts0),
                 tty ? "   " : "\n");
  }
  if (!d.o.quiet && tty) std::fprintf(stderr, "\n");
}

// Runs the clients and the progress line; returns the seconds the clients took.
double run_clients(Demo& d, std::uint64_t conflicts0) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int p = 0; p < d.producers; ++p) threads.emplace_back([&d, p] { produce(d, p); });
  for (int c = 0; c < d.consumers; ++c) threads.emplace_back([&d, c] { consume(d, c); });
  std::atomic<bool> finished{false};
  std::thread progress([&] { show_progress(d, finished, t0, conflicts0); });
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  finished = true;
  progress.join();
  return secs;
}

struct Verdict {
  history::Result queue, pq;
  std::int64_t mins = 0, maxs = 0;  // successful pop_min / pop_max
};

// Drains what is left (counted as remaining) and checks both histories.
Verdict check(Demo& d) {
  std::vector<std::string> qleft, pleft;
  while (auto v = d.queue.pop()) qleft.push_back(*v);
  while (auto v = d.pq.pop_min()) pleft.push_back(*v);
  Verdict v;
  v.queue = history::check(flatten(d.qpush), flatten(d.qpop), qleft);
  v.pq = history::check(flatten(d.ppush), flatten(d.ppop), pleft);
  for (const auto& pops : d.ppop) {
    for (const auto& p : pops) {
      if (p.value) (p.kind == history::PopKind::kMin ? v.mins : v.maxs)++;
    }
  }
  return v;
}

// The summary README.md shows; returns the exit status.
int print_summary(const Demo& d, const Verdict& v, double secs, std::uint64_t conflicts) {
  const auto ll = [](std::int64_t n) { return static_cast<long long>(n); };
  const std::int64_t ops = v.queue.pushed + v.pq.pushed + v.queue.popped + v.pq.popped;
  std::printf("kvq demo: %d clients (%d producers, %d consumers), %s pops, %s\n", d.o.clients,
              d.producers, d.consumers, d.o.high_contention ? "high-contention" : "plain",
              d.o.url.c_str());
  std::printf("  Queue:          %lld pushed, %lld popped, %lld left over, %lld violations\n",
              ll(v.queue.pushed), ll(v.queue.popped), ll(v.queue.remaining),
              ll(v.queue.violations));
  std::printf(
      "  PriorityQueue:  %lld pushed, %lld popped (%lld pop_min, %lld pop_max), %lld left over, "
      "%lld violations\n",
      ll(v.pq.pushed), ll(v.pq.popped), ll(v.mins), ll(v.maxs), ll(v.pq.remaining),
      ll(v.pq.violations));
  std::printf("  %.2f s, %.0f ops/s, %llu conflicts retried (%.3f per op)\n", secs,
              static_cast<double>(ops) / secs, static_cast<unsigned long long>(conflicts),
              ops ? static_cast<double>(conflicts) / static_cast<double>(ops) : 0.0);
  for (const auto& p : v.queue.problems) std::printf("  Queue problem: %s\n", p.c_str());
  for (const auto& p : v.pq.problems) std::printf("  PriorityQueue problem: %s\n", p.c_str());
  const bool ok = v.queue.ok && v.pq.ok;
  std::printf(ok ? "  verdict: PASS (every item popped exactly once, none lost, FIFO and priority "
                   "order held)\n"
                 : "  verdict: FAIL\n");
  return ok ? kExitOk : kExitError;
}

}  // namespace

int run_demo(const DemoOptions& o) {
  std::random_device rd;
  const std::int64_t run = static_cast<std::int64_t>(rd() & 0x7fffffff);
  Demo d(o, kvq::open(o.url), Subspace(Tuple().append("demo").append(run)));
  const std::uint64_t conflicts0 = d.db->stats().conflicts;
  const double secs = run_clients(d, conflicts0);
  const std::uint64_t conflicts = d.db->stats().conflicts - conflicts0;
  if (d.failed) {
    std::printf("kvq demo: FAIL: a client stopped with an error: %s\n", d.first_error.c_str());
    return kExitError;
  }
  return print_summary(d, check(d), secs, conflicts);
}

void add_demo_command(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<DemoOptions>();
  auto plain = std::make_shared<bool>(false);
  auto* demo = app.add_subcommand(
      "demo",
      "N clients on one shared PriorityQueue and one Queue (a fresh memory: database unless --db "
      "is given); checks the whole history at the end (exit 1 if the check fails)");
  demo->add_option("--clients,-c", opts->clients, "number of client threads")
      ->transform(Between(2, 1024))
      ->capture_default_str();
  demo->add_option("--items,-n", opts->items, "items pushed into each structure")
      ->transform(Between(1, 100'000'000))
      ->capture_default_str();
  demo->add_flag("--plain", *plain, "plain pops instead of high-contention pops");
  demo->add_flag("--quiet,-q", opts->quiet, "no live progress line");
  set_action(demo, ctx, [&ctx, opts, plain] {
    opts->url = ctx.url_or_memory();
    opts->high_contention = !*plain;
    return run_demo(*opts);
  });
}

}  // namespace kvq::cli
