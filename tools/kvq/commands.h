// The kvq CLI's command groups: each add_*_command(s) registers its subcommands, options and
// actions on the root CLI::App (one cmd_*.cc per group); the helpers below them are what the groups
// do, callable (and tested) without going through the command line.
#ifndef KVQ_TOOLS_KVQ_COMMANDS_H_
#define KVQ_TOOLS_KVQ_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvq/kvq.h"
#include "tools/kvq/cli.h"

namespace kvq::cli {

// `kvq queue push|pop|peek|size|clear` (cmd_queue.cc).
void add_queue_commands(CLI::App& app, Context& ctx);
// `kvq pq push|pop-min|pop-max|peek-min|peek-max|size|clear` (cmd_pq.cc).
void add_pq_commands(CLI::App& app, Context& ctx);
// The work-queue subcommands (cmd_work.cc) of `kvq queue` (take, ack, nack, extend, stats,
// dead-letters, redrive) and of `kvq pq` (take-min, take-max and the same), on the queue `open`
// opens.
void add_queue_work_commands(CLI::App* queue, Context& ctx, std::function<Queue()> open);
void add_pq_work_commands(CLI::App* pq, Context& ctx, std::function<PriorityQueue()> open);
// `kvq fair push|pop|take|ack|nack|extend|dead-letters|redrive|set-weight|stats` (cmd_fair.cc).
void add_fair_commands(CLI::App& app, Context& ctx);

// One tenant of a fair queue, with the lease and dead-letter calls the work-queue commands make on
// a Queue (cmd_fair.cc): leases get the tenant filled in, then go to the FairQueue's methods.
class FairTenant {
 public:
  FairTenant(FairQueue fair, std::string tenant)
      : fair_(std::move(fair)), tenant_(std::move(tenant)) {}
  // FairQueue::ack / nack / extend of `lease` as a lease of this tenant.
  void ack(const Lease& lease);
  void nack(const Lease& lease, std::chrono::milliseconds delay, std::string_view reason);
  WallClock::time_point extend(const Lease& lease, std::chrono::milliseconds visibility_timeout);
  // FairQueue::peek_dead_letters / redrive for this tenant.
  std::vector<DeadLetter> peek_dead_letters(int limit);
  std::int64_t redrive(std::int64_t n);

 private:
  Lease ours(const Lease& lease) const;

  FairQueue fair_;
  std::string tenant_;
};
// The work-queue subcommands of `kvq fair` (cmd_work.cc): ack, nack, extend, dead-letters and
// redrive, on the tenant `open` opens; returns them (the caller adds --tenant).
std::vector<CLI::App*> add_fair_work_commands(CLI::App* fair, Context& ctx,
                                              std::function<FairTenant()> open);
// `kvq dump` (cmd_dump.cc).
void add_dump_command(CLI::App& app, Context& ctx);
// `kvq demo` (cmd_demo.cc).
void add_demo_command(CLI::App& app, Context& ctx);
// `kvq bench` (cmd_bench.cc).
void add_bench_command(CLI::App& app, Context& ctx);
// `kvq simulate` (cmd_simulate.cc).
void add_simulate_command(CLI::App& app, Context& ctx);

// How push_values pushes: `batch` pushes some values in one idempotent transaction (a
// push_batch), `one` pushes a single value with the command's options (a delayed push).
struct Pushers {
  std::function<void(const std::vector<std::string>&)> batch;
  std::function<void(const std::string&)> one;
};

// Pushes `values` in order with pushers.batch (one transaction and retry loop, never inserted
// twice after commit_unknown_result); if the engine cannot take them in one transaction (etcd's
// --max-txn-ops), in consecutive batches, halved until they fit. If `delayed`, each value is
// pushed on its own with pushers.one (idempotently too). So values come out in this order. On a
// kvq::Error throws CliError(kExitError) saying how many values were pushed before it; `command`
// names the command in that message.
void push_values(const Pushers& pushers, const std::vector<std::string>& values,
                 const std::string& command, bool delayed);
// The pushers of `queue`: Queue::push_batch, and Queue::push(value, options). `queue` must
// outlive them.
Pushers queue_pushers(Queue& queue, const PushOptions& options = {});

struct DemoOptions {
  std::string url = "memory:";
  int clients = 8;
  int items = 20000;  // per structure (Queue and PriorityQueue each)
  bool high_contention = true;
  bool quiet = false;  // no live progress line
};
// Runs the demo; prints progress to stderr and the summary to stdout. Returns the exit status
// (0 if the history check passed, 1 otherwise).
int run_demo(const DemoOptions& options);

struct BenchOptions {
  std::string url = "memory:";
  std::vector<int> clients = {1, 2, 4, 8, 16, 32, 64};
  double seconds = 1.0;
  std::vector<std::string> kinds = {"queue", "pq"};
  std::vector<std::string> modes = {"plain", "hc"};
  std::vector<std::string> ops = {"push", "pop"};
  int prefill = 100000;
  int batch_size = 128;        // HighContentionOptions::batch_size
  bool combine = false;        // QueueOptions::combine (flat combining of one process's threads)
  bool favor_latency = false;  // QueueOptions::combine_favors_latency (implies combine)
  // Worker processes per measurement, each with `clients` threads (> 1: etcd only).
  int processes = 1;
  // >= 0: this process is a worker of another's --processes, measuring the subspace numbered so.
  int worker = -1;
  bool json = false;
  std::string plot;  // a PNG file to draw ops/s against clients into; empty: none
};
// Runs the contention benchmark; table (or JSON) on stdout. Returns the exit status.
int run_bench(const BenchOptions& options);

struct SimulateOptions {
  std::uint64_t seeds = 100;     // how many seeds
  std::uint64_t first_seed = 1;  // seeds first_seed .. first_seed + seeds - 1
};
// Runs each seed twice (tools/kvq/simulation.h; the two runs must agree); prints each failing
// seed with its problems and the command that replays it, then a summary, to stdout. Returns
// kExitOk if every seed passed, kExitError otherwise.
int run_simulate(const SimulateOptions& options);

}  // namespace kvq::cli

#endif  // KVQ_TOOLS_KVQ_COMMANDS_H_
