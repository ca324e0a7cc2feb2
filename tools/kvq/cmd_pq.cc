// `kvq pq ...`: a double-ended priority queue at subspace ("P", NAME).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "tools/kvq/commands.h"

namespace kvq::cli {
namespace {

struct PqArgs {
  std::string name = "default";
  std::string value;
  std::int64_t priority = 0;
  PopFlags pop;
  bool raw = false;           // peek
  std::int64_t delay_ms = 0;  // push --delay
};

PriorityQueue open_pq(const Context& ctx, const PqArgs& args) {
  PriorityQueueOptions options;
  options.high_contention = ctx.high_contention;
  options.max_attempts = ctx.max_attempts;
  options.pop_timeout = batch_pop_timeout(args.pop);  // 0 unless a pop command bounds it
  return PriorityQueue(ctx.open(), Subspace(Tuple().append("P").append(args.name)), options);
}

void add_push(CLI::App* pq, Context& ctx, std::shared_ptr<PqArgs> args) {
  auto* push = pq->add_subcommand("push", "insert VALUE with --priority P");
  push->add_option("--priority,-p", args->priority, "priority (int64)")
      ->transform(Int64())
      ->required();
  push->add_option("value", args->value, "value to push; '-' reads it from stdin")->required();
  add_delay_option(push, args->delay_ms, "invisible for this long: 500ms, 10s, 1m");
  set_action(push, ctx, [&ctx, args] {
    std::vector<std::string> values = read_values({args->value}, stdin, "pq push");
    PushOptions options;
    options.delay = std::chrono::milliseconds(args->delay_ms);
    open_pq(ctx, *args).push(values.front(), args->priority, options);  // idempotent
    return kExitOk;
  });
}

// pop-min / pop-max: `max` selects the side.
void add_pop(CLI::App* pq, Context& ctx, std::shared_ptr<PqArgs> args, bool max) {
  auto* pop = pq->add_subcommand(
      max ? "pop-max" : "pop-min",
      max ? "remove and print a highest-priority value (the newest of that priority; exit 3 if "
            "empty)"
          : "remove and print a lowest-priority value (the oldest of that priority; exit 3 if "
            "empty)");
  add_pop_flags(pop, args->pop);
  set_action(pop, ctx, [&ctx, args, max] {
    PriorityQueue p = open_pq(ctx, *args);
    PopFns fns{
        [&](std::chrono::milliseconds t) { return max ? p.pop_max(t) : p.pop_min(t); },
        [&](std::chrono::milliseconds t) { return max ? p.pop_max_wait(t) : p.pop_min_wait(t); },
        [&](std::size_t n) { return max ? p.pop_max_batch(n) : p.pop_min_batch(n); }};
    return run_pop(fns, args->pop, "priority queue");
  });
}

void add_peek(CLI::App* pq, Context& ctx, std::shared_ptr<PqArgs> args, bool max) {
  auto* peek = pq->add_subcommand(max ? "peek-max" : "peek-min",
                                  max ? "print what pop-max would return (exit 3 if empty)"
                                      : "print what pop-min would return (exit 3 if empty)");
  peek->add_flag("--raw,-r", args->raw, "print the value's bytes only, no newline");
  set_action(peek, ctx, [&ctx, args, max] {
    PriorityQueue p = open_pq(ctx, *args);
    return print_value(max ? p.peek_max() : p.peek_min(), args->raw, "priority queue");
  });
}

void add_size_and_clear(CLI::App* pq, Context& ctx, std::shared_ptr<PqArgs> args) {
  auto* size = pq->add_subcommand(
      "size", "print the number of ready items (not delayed or leased ones: see stats)");
  set_action(size, ctx, [&ctx, args] {
    std::cout << open_pq(ctx, *args).size() << "\n";
    return kExitOk;
  });
  auto* clear = pq->add_subcommand("clear", "remove every item");
  set_action(clear, ctx, [&ctx, args] {
    open_pq(ctx, *args).clear();
    return kExitOk;
  });
}

}  // namespace

void add_pq_commands(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<PqArgs>();
  auto* pq = app.add_subcommand("pq", "operate on a priority queue (subspace (\"P\", NAME))");
  pq->add_option("--name", args->name, "priority queue name")
      ->check(StructureName())
      ->capture_default_str();
  add_push(pq, ctx, args);
  add_pop(pq, ctx, args, /*max=*/false);
  add_pop(pq, ctx, args, /*max=*/true);
  add_peek(pq, ctx, args, /*max=*/false);
  add_peek(pq, ctx, args, /*max=*/true);
  add_size_and_clear(pq, ctx, args);
  add_pq_work_commands(pq, ctx, [&ctx, args] { return open_pq(ctx, *args); });
}

}  // namespace kvq::cli
