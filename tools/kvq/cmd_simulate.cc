// `kvq simulate`: deterministic simulation of clients on a work Queue, a PriorityQueue or a
// FairQueue under injected faults, in simulated time, one reproducible run per seed
// (tools/kvq/simulation.h), each checked as a whole and run twice to check it is deterministic.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <map>
#include <string>

#include "tools/kvq/cli.h"
#include "tools/kvq/commands.h"
#include "tools/kvq/simulation.h"

namespace kvq::cli {
namespace {

// The sums over seeds that the summary prints.
struct Totals {
  std::uint64_t seeds = 0, failed = 0, nondeterministic = 0, steps = 0;
  std::int64_t clients = 0, operations = 0, pushed = 0, popped = 0, acked = 0;
  std::int64_t leases_lost = 0, extended = 0, redeliveries = 0, simulated_ms = 0, violations = 0;
  std::int64_t high_contention = 0, combining = 0, combined = 0, waits = 0, waits_empty = 0,
               delayed_pushes = 0, delayed_nacks = 0;
  std::uint64_t unknown_applied = 0, unknown_not_applied = 0, conflicts = 0, too_old = 0;
  std::int64_t fairness_pops = 0, weights_set = 0, lease_limited = 0, limited_takes = 0;
  std::map<std::string, std::int64_t> structures;  // seeds per structure
  std::uint64_t digest = 0;                        // of the seeds' digests, in order

  void add(const SeedResult& r) {
    ++seeds;
    digest = (digest ^ r.digest) * 1099511628211ULL;
    steps += r.steps;
    clients += r.clients;
    operations += r.operations;
    pushed += r.pushed;
    popped += r.popped;
    acked += r.acked;
    leases_lost += r.leases_lost;
    extended += r.extended;
    redeliveries += r.redeliveries;
    high_contention += r.high_contention ? 1 : 0;
    combining += r.combine ? 1 : 0;
    combined += r.combined;
    fairness_pops += r.fairness_pops;
    weights_set += r.weights_set;
    lease_limited += r.lease_limit > 0 ? 1 : 0;
    limited_takes += r.limited_takes;
    ++structures[r.structure];
    waits += r.waits;
    waits_empty += r.waits_empty;
    delayed_pushes += r.delayed_pushes;
    delayed_nacks += r.delayed_nacks;
    simulated_ms += r.simulated_ms;
    violations += static_cast<std::int64_t>(r.problems.size());
    unknown_applied += r.unknown_applied;
    unknown_not_applied += r.unknown_not_applied;
    conflicts += r.conflicts;
    too_old += r.too_old;
  }
};

void report_failure(const SeedResult& r, const std::string& why) {
  std::printf("seed %" PRIu64 ": FAIL: %s\n", r.seed, why.c_str());
  for (const std::string& p : r.problems) std::printf("  %s\n", p.c_str());
  std::printf("  replay: kvq simulate --seed %" PRIu64 "\n", r.seed);
}

// Runs `seed` twice; adds it to `t`; prints it if it failed.
void run_one(std::uint64_t seed, Totals& t) {
  const SeedResult r = simulate_seed(seed);
  const SeedResult again = simulate_seed(seed);
  t.add(r);
  const bool same = again.digest == r.digest && again.problems == r.problems;
  if (!same) ++t.nondeterministic;
  if (!r.problems.empty() || !same) {
    ++t.failed;
    report_failure(r, same ? "history check" : "two runs of the seed differ");
  }
}

std::int64_t at(const std::map<std::string, std::int64_t>& counts, const std::string& key) {
  auto it = counts.find(key);
  return it == counts.end() ? 0 : it->second;
}

void print_summary(const SimulateOptions& o, const Totals& t, double real_seconds) {
  std::printf("kvq simulate: %" PRIu64 " seeds (%" PRIu64 "..%" PRIu64
              "), each run twice; %.1f s real, %.0f s simulated\n",
              t.seeds, o.first_seed, o.first_seed + o.seeds - 1, real_seconds,
              static_cast<double>(t.simulated_ms) / 1000.0);
  std::printf("  clients %" PRId64 ", operations %" PRId64 ", scheduling steps %" PRIu64 "\n",
              t.clients, t.operations, t.steps);
  std::printf("  pushed %" PRId64 ", delivered %" PRId64 " (popped %" PRId64 ", acked %" PRId64
              "), redelivered %" PRId64 ", leases extended %" PRId64 ", leases lost %" PRId64 "\n",
              t.pushed, t.popped + t.acked, t.popped, t.acked, t.redeliveries, t.extended,
              t.leases_lost);
  std::printf(
      "  structures: Queue %" PRId64 " seeds, PriorityQueue %" PRId64 ", FairQueue %" PRId64
      " (fairness probes, weighted: %" PRId64 " pops; weights set by clients %" PRId64
      "; with a lease limit of 1 or 2: %" PRId64 " seeds, %" PRId64 " takes checked against it)\n",
      at(t.structures, "Queue"), at(t.structures, "PriorityQueue"), at(t.structures, "FairQueue"),
      t.fairness_pops, t.weights_set, t.lease_limited, t.limited_takes);
  std::printf("  high-contention seeds %" PRId64 ", combining seeds %" PRId64 " (%" PRId64
              " operations served by another client's group); blocking waits %" PRId64 " (%" PRId64
              " timed out empty); delayed pushes %" PRId64 ", delayed nacks %" PRId64 "\n",
              t.high_contention, t.combining, t.combined, t.waits, t.waits_empty, t.delayed_pushes,
              t.delayed_nacks);
  std::printf("  faults: commit_unknown_result applied %" PRIu64 ", not applied %" PRIu64
              ", spurious not_committed %" PRIu64 ", transaction_too_old %" PRIu64 "\n",
              t.unknown_applied, t.unknown_not_applied, t.conflicts, t.too_old);
  std::printf("  digest %016" PRIx64 " (the same seeds give the same digest)\n", t.digest);
  std::printf("  violations %" PRId64 "; failed seeds %" PRIu64 " (nondeterministic %" PRIu64
              "): %s\n",
              t.violations, t.failed, t.nondeterministic, t.failed == 0 ? "PASS" : "FAIL");
}

}  // namespace

int run_simulate(const SimulateOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  Totals t;
  for (std::uint64_t i = 0; i < o.seeds; ++i) run_one(o.first_seed + i, t);
  const std::chrono::duration<double> real = std::chrono::steady_clock::now() - start;
  print_summary(o, t, real.count());
  return t.failed == 0 ? kExitOk : kExitError;
}

void add_simulate_command(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<SimulateOptions>();
  auto* sim = app.add_subcommand("simulate",
                                 "deterministic simulation: per seed, clients on a work Queue, "
                                 "PriorityQueue or FairQueue of a "
                                 "memory: database with injected faults, in simulated time; checks "
                                 "each whole history (exit 1 if one fails)");
  sim->add_option("--seeds,-n", opts->seeds, "number of seeds to run")
      ->transform(Between(1, 100'000'000))
      ->capture_default_str();
  sim->add_option("--seed,-s", opts->first_seed, "the first seed (alone: replay this one seed)")
      ->transform(Uint64())
      ->capture_default_str();
  set_action(sim, ctx, [opts, sim] {
    if (sim->count("--seed") > 0 && sim->count("--seeds") == 0) opts->seeds = 1;
    if (opts->first_seed > std::numeric_limits<std::uint64_t>::max() - (opts->seeds - 1)) {
      throw CliError(kExitUsage, "simulate: --seed " + std::to_string(opts->first_seed) +
                                     " with --seeds " + std::to_string(opts->seeds) +
                                     " runs past the last seed, " +
                                     std::to_string(std::numeric_limits<std::uint64_t>::max()));
    }
    return run_simulate(*opts);
  });
}

}  // namespace kvq::cli
