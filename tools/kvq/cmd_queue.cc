// `kvq queue ...`: a FIFO queue at subspace ("Q", NAME).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "tools/kvq/commands.h"

namespace kvq::cli {
namespace {

struct QueueArgs {
  std::string name = "default";
  std::vector<std::string> values;
  PopFlags pop;
  bool raw = false;           // peek
  std::int64_t delay_ms = 0;  // push --delay
};

Queue open_queue(const Context& ctx, const QueueArgs& args) {
  QueueOptions options;
  options.high_contention = ctx.high_contention;
  options.max_attempts = ctx.max_attempts;
  options.pop_timeout = batch_pop_timeout(args.pop);  // 0 unless a pop command bounds it
  return Queue(ctx.open(), Subspace(Tuple().append("Q").append(args.name)), options);
}

void add_push(CLI::App* queue, Context& ctx, std::shared_ptr<QueueArgs> args) {
  auto* push = queue->add_subcommand(
      "push",
      "append each VALUE at the back, in order, in one transaction (split, in order, into several "
      "only if the engine cannot take them in one)");
  add_values_arg(push, args->values);
  add_delay_option(push, args->delay_ms, "invisible for this long: 500ms, 10s, 1m");
  set_action(push, ctx, [&ctx, args] {
    std::vector<std::string> values = read_values(args->values, stdin, "queue push");
    Queue q = open_queue(ctx, *args);
    PushOptions options;
    options.delay = std::chrono::milliseconds(args->delay_ms);
    push_values(queue_pushers(q, options), values, "queue push", args->delay_ms > 0);
    return kExitOk;
  });
}

void add_pop_and_peek(CLI::App* queue, Context& ctx, std::shared_ptr<QueueArgs> args) {
  auto* pop = queue->add_subcommand("pop", "remove and print the front value (exit 3 if empty)");
  add_pop_flags(pop, args->pop);
  set_action(pop, ctx, [&ctx, args] {
    Queue q = open_queue(ctx, *args);
    PopFns fns{[&](std::chrono::milliseconds t) { return q.pop(t); },
               [&](std::chrono::milliseconds t) { return q.pop_wait(t); },
               [&](std::size_t n) { return q.pop_batch(n); }};
    return run_pop(fns, args->pop, "queue");
  });
  auto* peek = queue->add_subcommand("peek", "print the front value (exit 3 if empty)");
  peek->add_flag("--raw,-r", args->raw, "print the value's bytes only, no newline");
  set_action(peek, ctx, [&ctx, args] {
    Queue q = open_queue(ctx, *args);
    return print_value(q.peek(), args->raw, "queue");
  });
}

void add_size_and_clear(CLI::App* queue, Context& ctx, std::shared_ptr<QueueArgs> args) {
  auto* size = queue->add_subcommand(
      "size", "print the number of ready items (not delayed or leased ones: see stats)");
  set_action(size, ctx, [&ctx, args] {
    std::cout << open_queue(ctx, *args).size() << "\n";
    return kExitOk;
  });
  auto* clear = queue->add_subcommand("clear", "remove every item");
  set_action(clear, ctx, [&ctx, args] {
    open_queue(ctx, *args).clear();
    return kExitOk;
  });
}

}  // namespace

namespace {

// Pushes values[begin, end) with `batch`, halving the range (in order) while the engine cannot
// take it in one transaction. Returns how many values were pushed before an error, via *done.
void push_range(const Pushers& pushers, const std::vector<std::string>& values, std::size_t begin,
                std::size_t end, std::size_t* done) {
  try {
    pushers.batch(std::vector<std::string>(values.begin() + static_cast<std::ptrdiff_t>(begin),
                                           values.begin() + static_cast<std::ptrdiff_t>(end)));
    *done = end;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kTransactionTooLarge || end - begin < 2) throw;
    const std::size_t mid = begin + (end - begin) / 2;
    push_range(pushers, values, begin, mid, done);
    push_range(pushers, values, mid, end, done);
  }
}

// Pushes each value on its own: delayed pushes have no batch form.
void push_each(const Pushers& pushers, const std::vector<std::string>& values, std::size_t* done) {
  for (const std::string& value : values) {
    pushers.one(value);
    ++*done;
  }
}

}  // namespace

Pushers queue_pushers(Queue& queue, const PushOptions& options) {
  return {[&queue](const std::vector<std::string>& some) { queue.push_batch(some); },
          [&queue, options](const std::string& value) { queue.push(value, options); }};
}

void push_values(const Pushers& pushers, const std::vector<std::string>& values,
                 const std::string& command, bool delayed) {
  std::size_t done = 0;
  try {
    if (delayed) {
      push_each(pushers, values, &done);
    } else {
      push_range(pushers, values, 0, values.size(), &done);
    }
  } catch (const Error& e) {
    if (done == 0) throw;
    throw CliError(kExitError, command + ": " + std::to_string(done) + " of " +
                                   std::to_string(values.size()) +
                                   " values were pushed, then: " + e.what());
  }
}

void add_queue_commands(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<QueueArgs>();
  auto* queue = app.add_subcommand("queue", "operate on a FIFO queue (subspace (\"Q\", NAME))");
  queue->add_option("--name", args->name, "queue name")
      ->check(StructureName())
      ->capture_default_str();
  add_push(queue, ctx, args);
  add_pop_and_peek(queue, ctx, args);
  add_size_and_clear(queue, ctx, args);
  add_queue_work_commands(queue, ctx, [&ctx, args] { return open_queue(ctx, *args); });
}

}  // namespace kvq::cli
