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
  bool raw = false;
  std::int64_t timeout_ms = 0;
  std::int64_t delay_ms = 0;
};

Queue open_queue(const Context& ctx, const QueueArgs& args) {
  QueueOptions options;
  options.high_contention = ctx.high_contention;
  return Queue(ctx.open(), Subspace(Tuple().append("Q").append(args.name)), options);
}

void add_push(CLI::App* queue, Context& ctx, std::shared_ptr<QueueArgs> args) {
  auto* push = queue->add_subcommand(
      "push", "append each VALUE at the back, in order (each push its own transaction)");
  push->add_option("value", args->values, "values to push; '-' reads one value from stdin")
      ->required();
  push->add_option("--delay", args->delay_ms, "invisible for this long: 500ms, 10s, 1m")
      ->transform(DurationMs())
      ->check(CLI::NonNegativeNumber);
  set_action(push, ctx, [&ctx, args] {
    std::vector<std::string> values = read_values(args->values, stdin, "queue push");
    Queue q = open_queue(ctx, *args);
    PushOptions options;
    options.delay = std::chrono::milliseconds(args->delay_ms);
    push_values(q, values, "queue push", options);
    return kExitOk;
  });
}

void add_pop_and_peek(CLI::App* queue, Context& ctx, std::shared_ptr<QueueArgs> args) {
  auto* pop = queue->add_subcommand("pop", "remove and print the front value (exit 3 if empty)");
  pop->add_flag("--raw,-r", args->raw, "print the value's bytes only, no newline");
  pop->add_option("--timeout", args->timeout_ms,
                  "give up after this long (timed_out, exit 1): 500ms, 5s, 1m; default: never")
      ->transform(DurationMs())
      ->check(CLI::NonNegativeNumber);
  set_action(pop, ctx, [&ctx, args] {
    Queue q = open_queue(ctx, *args);
    return print_value(q.pop(std::chrono::milliseconds(args->timeout_ms)), args->raw, "queue");
  });
  auto* peek = queue->add_subcommand("peek", "print the front value (exit 3 if empty)");
  peek->add_flag("--raw,-r", args->raw, "print the value's bytes only, no newline");
  set_action(peek, ctx, [&ctx, args] {
    Queue q = open_queue(ctx, *args);
    return print_value(q.peek(), args->raw, "queue");
  });
}

void add_size_and_clear(CLI::App* queue, Context& ctx, std::shared_ptr<QueueArgs> args) {
  auto* size = queue->add_subcommand("size", "print the number of items");
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

void push_values(Queue& queue, const std::vector<std::string>& values, const std::string& command,
                 const PushOptions& options) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    try {
      queue.push(values[i], options);
    } catch (const Error& e) {
      if (i == 0) throw;
      throw CliError(kExitError, command + ": " + std::to_string(i) + " of " +
                                     std::to_string(values.size()) +
                                     " values were pushed, then: " + e.what());
    }
  }
}

void add_queue_commands(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<QueueArgs>();
  auto* queue = app.add_subcommand("queue", "operate on a FIFO queue (subspace (\"Q\", NAME))");
  queue->add_option("--name", args->name, "queue name")->check(NonEmpty())->capture_default_str();
  add_push(queue, ctx, args);
  add_pop_and_peek(queue, ctx, args);
  add_size_and_clear(queue, ctx, args);
  add_queue_work_commands(queue, ctx, [&ctx, args] { return open_queue(ctx, *args); });
}

}  // namespace kvq::cli
