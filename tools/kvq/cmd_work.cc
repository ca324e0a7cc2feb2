// The work-queue commands of `kvq queue` and `kvq pq` (kvq/lease.h; docs/queues.md, "Work
// queues"): take (pq: take-min, take-max; --count N leases in one transaction, --wait DUR blocks
// until one is ready), ack, nack, extend, stats, dead-letters, redrive; and of `kvq fair` (for
// one tenant): ack, nack, extend, dead-letters, redrive. Lease tokens print as
// base64url text ([A-Za-z0-9_-]), which a shell passes back unchanged.
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "tools/kvq/commands.h"

namespace kvq::cli {
namespace {

struct WorkArgs {
  std::int64_t vt_ms = 30'000;
  std::int64_t delay_ms = 0;
  std::string token;
  std::string reason;
  std::int64_t count = 0;       // redrive
  std::int64_t take_count = 1;  // take --count
  std::int64_t wait_ms = 0;     // take --wait
  int limit = 10;
  bool json = false;
  bool raw = false;
};

// What print_lease prints for a lease: a line of JSON with --json, else its token on a line,
// then its value as print_value prints it.
std::string lease_text(const Lease& lease, const WorkArgs& args) {
  if (args.json) return json_line(lease_json(lease)) + "\n";
  return lease.token_text() + "\n" + (args.raw ? lease.value : lease.value + '\n');
}

int print_lease(const std::optional<Lease>& lease, const WorkArgs& args, const std::string& what) {
  if (!lease) return print_value(std::nullopt, args.raw, what);
  emit(lease_text(*lease, args));
  return kExitOk;
}

int print_stats(const QueueStats& s, bool json) {
  const std::int64_t age = s.oldest_ready_age ? s.oldest_ready_age->count() : -1;
  if (json) {
    std::cout << json_line({{"ready", s.ready},
                            {"delayed", s.delayed},
                            {"leased", s.leased},
                            {"dead_letters", s.dead_letters},
                            {"oldest_ready_age_ms", age}})
              << "\n";
  } else {
    std::cout << "ready " << s.ready << "\ndelayed " << s.delayed << "\nleased " << s.leased
              << "\ndead_letters " << s.dead_letters << "\noldest_ready_age_ms " << age << "\n";
  }
  return kExitOk;
}

// ack, nack, extend: the same on Queue, PriorityQueue and a fair queue's tenant; returns them.
template <typename Q>
std::vector<CLI::App*> add_lease_commands(CLI::App* group, Context& ctx, std::function<Q()> open,
                                          std::shared_ptr<WorkArgs> args) {
  auto* ack = group->add_subcommand("ack", "remove the leased item (lease_lost, exit 1, if gone)");
  add_token_arg(ack, args->token);
  // Each command reads its token before it opens the database: a malformed token opens nothing.
  set_action(ack, ctx, [open, args] {
    const Lease lease = Lease::from_text(args->token);
    open().ack(lease);
    return kExitOk;
  });
  auto* nack = group->add_subcommand("nack", "give the leased item back, now or after --delay");
  add_token_arg(nack, args->token);
  add_delay_option(nack, args->delay_ms, "visible again after this long: 500ms, 5s, 1m");
  nack->add_option("--reason", args->reason, "why (kept if the item goes to the dead letters)");
  set_action(nack, ctx, [open, args] {
    const Lease lease = Lease::from_text(args->token);
    open().nack(lease, std::chrono::milliseconds(args->delay_ms), args->reason);
    return kExitOk;
  });
  auto* extend =
      group->add_subcommand("extend", "renew a lease; prints the new deadline (unix ms)");
  add_token_arg(extend, args->token);
  add_vt_option(extend, args->vt_ms, "the lease now runs out this long from now");
  set_action(extend, ctx, [open, args] {
    const Lease lease = Lease::from_text(args->token);
    std::cout << unix_ms(open().extend(lease, std::chrono::milliseconds(args->vt_ms))) << "\n";
    return kExitOk;
  });
  return {ack, nack, extend};
}

// stats: the same on Queue and PriorityQueue.
template <typename Q>
void add_stats_command(CLI::App* group, Context& ctx, std::function<Q()> open,
                       std::shared_ptr<WorkArgs> args) {
  auto* stats = group->add_subcommand("stats", "ready, delayed, leased, dead-letter counts");
  stats->add_flag("--json", args->json, "print JSON");
  set_action(stats, ctx, [open, args] { return print_stats(open().stats(), args->json); });
}

// dead-letters, redrive: the same on Queue, PriorityQueue and a fair queue's tenant; returns them.
template <typename Q>
std::vector<CLI::App*> add_dead_letter_commands(CLI::App* group, Context& ctx,
                                                std::function<Q()> open,
                                                std::shared_ptr<WorkArgs> args) {
  auto* dead = group->add_subcommand(
      "dead-letters", "list dead letters: attempts, priority, reason, value (tab-separated)");
  dead->add_option("--limit", args->limit, "at most this many")->transform(AtLeast(1));
  dead->add_flag("--json", args->json, "print JSON");
  set_action(dead, ctx, [open, args] {
    return print_dead_letters(open().peek_dead_letters(args->limit), args->json);
  });
  auto* redrive =
      group->add_subcommand("redrive", "move up to N dead letters back; prints how many");
  redrive->add_option("n", args->count, "how many")->required()->transform(AtLeast(0));
  set_action(redrive, ctx, [open, args] {
    std::cout << open().redrive(args->count) << "\n";
    return kExitOk;
  });
  return {dead, redrive};
}

// The batch and blocking forms of one take command (Queue::take; pq: its min or max side).
template <typename Q>
struct TakeFns {
  std::function<std::vector<Lease>(Q&, std::size_t, std::chrono::milliseconds)> batch;
  std::function<std::optional<Lease>(Q&, std::chrono::milliseconds, std::chrono::milliseconds)>
      wait;
};

// Takes what the command asks for and prints each lease (print_lease); kExitEmpty if none. With
// --wait the first is waited for (take_wait: timed_out if no take could commit in time) and
// printed before the rest of --count are taken at once (as `pop --wait -n`): the item is leased
// then, and printing it first keeps its token if that batch fails (and if it could not be
// printed, emit throws: nothing more is taken).
template <typename Q>
int take_and_print(Q& q, const TakeFns<Q>& fns, const WorkArgs& args, const std::string& what) {
  const std::chrono::milliseconds vt(args.vt_ms);
  const auto count = static_cast<std::size_t>(args.take_count);
  std::vector<Lease> leases;
  if (args.wait_ms == 0) {
    leases = fns.batch(q, count, vt);
    if (leases.empty()) return print_lease(std::nullopt, args, what);
  } else {
    const std::optional<Lease> first = fns.wait(q, vt, std::chrono::milliseconds(args.wait_ms));
    if (!first) return print_lease(std::nullopt, args, what);
    print_lease(first, args, what);
    if (count > 1) leases = fns.batch(q, count - 1, vt);
  }
  std::string text;  // the batch in one write
  for (const Lease& l : leases) text += lease_text(l, args);
  emit(text);
  return kExitOk;
}

template <typename Q>
void add_take(CLI::App* group, Context& ctx, std::function<Q()> open,
              std::shared_ptr<WorkArgs> args, const std::string& name, TakeFns<Q> fns,
              const std::string& what) {
  auto* command = group->add_subcommand(
      name, "lease the next item: print its token, then the value (exit 3 if none is ready)");
  add_vt_option(command, args->vt_ms, "visibility timeout: 500ms, 30s, 5m");
  auto* raw = command->add_flag("--raw,-r", args->raw, "print the value's bytes only, no newline");
  auto* json = command->add_flag(
      "--json", args->json,
      "print JSON (token, attempt, deadline_ms, priority, value or value_base64)");
  raw->excludes(json);
  auto* count =
      command
          ->add_option("--count,-n", args->take_count,
                       "lease up to N items in one transaction: token and value of each, in order")
          ->transform(Between(1, 1'000'000));
  raw->excludes(count);  // raw values would run into the next token with nothing between them
  command
      ->add_option("--wait", args->wait_ms,
                   "while none is ready, wait this long for one (exit 3 if none came): 500ms, "
                   "5s, 1m; woken by a watch, not polling. Bounds the wait for the first: "
                   "timed_out (exit 1) "
                   "if no take could commit by then")
      ->transform(DurationMs())
      ->check(LongerThanZero());
  set_action(command, ctx, [open, args, fns, what] {
    Q q = open();
    return take_and_print(q, fns, *args, what);
  });
}

}  // namespace

void add_queue_work_commands(CLI::App* queue, Context& ctx, std::function<Queue()> open) {
  auto args = std::make_shared<WorkArgs>();
  TakeFns<Queue> take{[](Queue& q, std::size_t n, auto vt) { return q.take_batch(n, vt); },
                      [](Queue& q, auto vt, auto timeout) { return q.take_wait(vt, timeout); }};
  add_take<Queue>(queue, ctx, open, args, "take", take, "queue");
  add_lease_commands<Queue>(queue, ctx, open, args);
  add_stats_command<Queue>(queue, ctx, open, args);
  add_dead_letter_commands<Queue>(queue, ctx, open, args);
}

void add_pq_work_commands(CLI::App* pq, Context& ctx, std::function<PriorityQueue()> open) {
  using PQ = PriorityQueue;
  auto args = std::make_shared<WorkArgs>();
  TakeFns<PQ> min{[](PQ& q, std::size_t n, auto vt) { return q.take_min_batch(n, vt); },
                  [](PQ& q, auto vt, auto timeout) { return q.take_min_wait(vt, timeout); }};
  TakeFns<PQ> max{[](PQ& q, std::size_t n, auto vt) { return q.take_max_batch(n, vt); },
                  [](PQ& q, auto vt, auto timeout) { return q.take_max_wait(vt, timeout); }};
  add_take<PQ>(pq, ctx, open, args, "take-min", min, "priority queue");
  add_take<PQ>(pq, ctx, open, args, "take-max", max, "priority queue");
  add_lease_commands<PQ>(pq, ctx, open, args);
  add_stats_command<PQ>(pq, ctx, open, args);
  add_dead_letter_commands<PQ>(pq, ctx, open, args);
}

std::vector<CLI::App*> add_fair_work_commands(CLI::App* fair, Context& ctx,
                                              std::function<FairTenant()> open) {
  auto args = std::make_shared<WorkArgs>();
  std::vector<CLI::App*> commands = add_lease_commands<FairTenant>(fair, ctx, open, args);
  for (CLI::App* c : add_dead_letter_commands<FairTenant>(fair, ctx, open, args)) {
    commands.push_back(c);
  }
  return commands;
}

}  // namespace kvq::cli
