// `kvq fair ...`: a fair queue across tenants at subspace ("F", NAME) (kvq/fair_queue.h;
// docs/queues.md, "Fair queues"): push, pop, take, stats, set-weight here; ack, nack, extend,
// dead-letters and redrive of one tenant (--tenant) are the work-queue commands (cmd_work.cc).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

#include "tools/kvq/commands.h"

namespace kvq::cli {
namespace {

struct FairArgs {
  std::string name = "default";
  std::string tenant;
  std::vector<std::string> values;
  std::int64_t delay_ms = 0;
  std::int64_t vt_ms = 30'000;
  int max_leased = 0;
  std::int64_t weight = 1;
  bool json = false;
};

FairQueue open_fair(const Context& ctx, const FairArgs& args) {
  FairQueueOptions options;
  options.high_contention = ctx.high_contention;
  options.max_attempts = ctx.max_attempts;
  options.max_leased_per_tenant = args.max_leased;
  return FairQueue(ctx.open(), Subspace(Tuple().append("F").append(args.name)), options);
}

// --tenant T: the tenant as fair pop / take / stats print it (escape(): \\ a backslash, \xNN a
// byte), or plain text without backslashes.
void add_tenant(CLI::App* command, FairArgs& args) {
  command
      ->add_option("--tenant", args.tenant,
                   "the tenant, as fair take prints it: \\\\ is a backslash, \\xNN the byte NN")
      ->required()
      ->check(NonEmpty())
      ->transform(Unescaped());
}

void add_push(CLI::App* fair, Context& ctx, const std::shared_ptr<FairArgs>& args) {
  auto* push = fair->add_subcommand(
      "push",
      "append each VALUE at the back of TENANT's items, in order, in one transaction (split, in "
      "order, into several only if the engine cannot take them in one)");
  add_tenant(push, *args);
  add_values_arg(push, args->values);
  add_delay_option(push, args->delay_ms, "invisible for this long: 500ms, 10s, 1m");
  set_action(push, ctx, [&ctx, args] {
    const std::vector<std::string> values = read_values(args->values, stdin, "fair push");
    FairQueue fq = open_fair(ctx, *args);
    PushOptions options;
    options.delay = std::chrono::milliseconds(args->delay_ms);
    push_values({[&](const std::vector<std::string>& some) { fq.push_batch(args->tenant, some); },
                 [&](const std::string& value) { fq.push(args->tenant, value, options); }},
                values, "fair push", args->delay_ms > 0);
    return kExitOk;
  });
}

// Prints the tenant on one line, then the value (with `json`, one line of JSON: tenant, value, as
// put_bytes puts them). Without an item, exit 3 with "is empty", or, if `fq` still has ready
// items (their tenants are at a lease limit a take found: docs/queues.md, "Fair queues"), with
// how many wait and what frees them.
int print_item(const std::optional<FairItem>& item, FairQueue& fq, std::string_view verb,
               bool json) {
  if (item && json) {
    nlohmann::json j = nlohmann::json::object();
    put_bytes(j, "tenant", item->tenant);
    put_bytes(j, "value", item->value);
    emit(json_line(j) + "\n");
    return kExitOk;
  }
  if (item) {
    emit(escape(item->tenant) + "\n");
    return print_value(item->value, false, "fair queue");
  }
  if (const std::int64_t ready = fq.size(); ready > 0) {
    std::cerr << "kvq: fair queue: nothing could be " << verb << ", though " << ready
              << (ready == 1 ? " item is" : " items are")
              << " ready: of tenants at their lease limit until one of their leases is acked, "
                 "nacked or runs out (or pushed since)\n";
    return kExitEmpty;
  }
  return print_value(std::nullopt, false, "fair queue");
}

void add_pop_and_take(CLI::App* fair, Context& ctx, const std::shared_ptr<FairArgs>& args) {
  auto* pop = fair->add_subcommand(
      "pop",
      "remove the next item in fair order; print its tenant, then the value (exit 3 if none)");
  pop->add_flag("--json", args->json, "print JSON: tenant, value (or tenant_base64, value_base64)");
  set_action(pop, ctx, [&ctx, args] {
    FairQueue fq = open_fair(ctx, *args);
    return print_item(fq.pop(), fq, "popped", args->json);
  });
  auto* take = fair->add_subcommand(
      "take", "lease the next item in fair order; print the token, the tenant, then the value");
  add_vt_option(take, args->vt_ms, "visibility timeout: 500ms, 30s, 5m");
  take->add_option("--max-leased", args->max_leased, "at most this many leased per tenant (0: any)")
      ->transform(AtLeast(0));
  take->add_flag("--json", args->json,
                 "print JSON: token, attempt, deadline_ms, priority, tenant, value (or "
                 "tenant_base64, value_base64)");
  set_action(take, ctx, [&ctx, args] {
    FairQueue fq = open_fair(ctx, *args);
    std::optional<Lease> lease = fq.take(std::chrono::milliseconds(args->vt_ms));
    if (lease && args->json) {
      emit(json_line(lease_json(*lease)) + "\n");
      return kExitOk;
    }
    if (lease) emit(lease->token_text() + "\n");
    return print_item(lease ? std::optional(FairItem{lease->tenant, lease->value}) : std::nullopt,
                      fq, "taken", false);
  });
}

void add_work_commands(CLI::App* fair, Context& ctx, const std::shared_ptr<FairArgs>& args) {
  const auto open = [&ctx, args] { return FairTenant(open_fair(ctx, *args), args->tenant); };
  for (CLI::App* command : add_fair_work_commands(fair, ctx, open)) add_tenant(command, *args);
}

void add_set_weight(CLI::App* fair, Context& ctx, const std::shared_ptr<FairArgs>& args) {
  auto* command = fair->add_subcommand(
      "set-weight", "give TENANT WEIGHT turns per round from its next turn on (default 1)");
  add_tenant(command, *args);
  command->add_option("weight", args->weight, "turns per round (int64 >= 1)")
      ->required()
      ->transform(AtLeast(1));
  set_action(command, ctx, [&ctx, args] {
    open_fair(ctx, *args).set_weight(args->tenant, args->weight);
    return kExitOk;
  });
}

int print_fair_stats(const std::vector<FairTenantStats>& stats, bool json) {
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const FairTenantStats& s : stats) {
      nlohmann::json tenant = {{"ready", s.ready},
                               {"delayed", s.delayed},
                               {"leased", s.leased},
                               {"dead_letters", s.dead_letters},
                               {"weight", s.weight}};
      put_bytes(tenant, "tenant", s.tenant);
      j.push_back(std::move(tenant));
    }
    std::cout << json_line(j) << "\n";
    return kExitOk;
  }
  std::cout << "tenant\tready\tdelayed\tleased\tdead_letters\tweight\n";
  for (const FairTenantStats& s : stats) {
    std::cout << escape(s.tenant) << "\t" << s.ready << "\t" << s.delayed << "\t" << s.leased
              << "\t" << s.dead_letters << "\t" << s.weight << "\n";
  }
  return kExitOk;
}

void add_stats(CLI::App* fair, Context& ctx, const std::shared_ptr<FairArgs>& args) {
  auto* stats = fair->add_subcommand(
      "stats", "per tenant: ready (depth), delayed, leased, dead letters, weight");
  stats->add_flag("--json", args->json, "print JSON");
  set_action(stats, ctx,
             [&ctx, args] { return print_fair_stats(open_fair(ctx, *args).stats(), args->json); });
}

}  // namespace

void add_fair_commands(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<FairArgs>();
  auto* fair =
      app.add_subcommand("fair", "operate on a fair queue across tenants (subspace (\"F\", NAME))");
  fair->add_option("--name", args->name, "fair queue name")
      ->check(StructureName())
      ->capture_default_str();
  add_push(fair, ctx, args);
  add_pop_and_take(fair, ctx, args);
  add_work_commands(fair, ctx, args);
  add_set_weight(fair, ctx, args);
  add_stats(fair, ctx, args);
}

Lease FairTenant::ours(const Lease& lease) const {
  Lease l = lease;
  l.tenant = tenant_;
  return l;
}

void FairTenant::ack(const Lease& lease) { fair_.ack(ours(lease)); }

void FairTenant::nack(const Lease& lease, std::chrono::milliseconds delay,
                      std::string_view reason) {
  fair_.nack(ours(lease), delay, reason);
}

WallClock::time_point FairTenant::extend(const Lease& lease,
                                         std::chrono::milliseconds visibility_timeout) {
  return fair_.extend(ours(lease), visibility_timeout);
}

std::vector<DeadLetter> FairTenant::peek_dead_letters(int limit) {
  return fair_.peek_dead_letters(tenant_, limit);
}

std::int64_t FairTenant::redrive(std::int64_t n) { return fair_.redrive(tenant_, n); }

}  // namespace kvq::cli
