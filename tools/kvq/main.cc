// kvq: command-line access to kvq queues, the demo and the contention benchmark. CLI11 parses
// everything; each command group lives in its cmd_*.cc (commands.h). Every failure is one line on
// stderr, "kvq: error: ...", and an exit status: 1 kvq error, 2 bad arguments, 3 empty queue.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "kvq/kvq.h"
#include "tools/kvq/cli.h"
#include "tools/kvq/commands.h"

namespace {

using kvq::cli::kExitUsage;

constexpr const char* kDescription =
    "kvq: shared FIFO and priority queues on a transactional key-value store.\n"
    "Global options (--db, --high-contention) may come before or after the command. A VALUE of "
    "'-' is read from stdin; after '--' every argument is a value.\n"
    "Exit status: 0 ok, 1 kvq error or failed check, 2 bad arguments, 3 pop/peek on an empty "
    "queue.";

// The subcommands given, outermost first ("queue", "push").
std::vector<const CLI::App*> given_commands(const CLI::App& app) {
  std::vector<const CLI::App*> chain;
  for (const CLI::App* at = &app; !at->get_subcommands().empty();) {
    at = at->get_subcommands().front();
    chain.push_back(at);
  }
  return chain;
}

std::string command_path(const std::vector<const CLI::App*>& chain) {
  std::string path;
  for (const CLI::App* c : chain) path += (path.empty() ? "" : " ") + c->get_name();
  return path;
}

// "queue, pq, dump, ..." : the subcommands of `app`.
std::string subcommand_names(const CLI::App& app) {
  std::string names;
  for (const CLI::App* c : app.get_subcommands({})) {
    names += (names.empty() ? "" : ", ") + c->get_name();
  }
  return names;
}

// Prints one usage error line about the commands given and returns kExitUsage.
int usage_error(const CLI::App& app, const std::string& message) {
  const std::string path = command_path(given_commands(app));
  std::cerr << "kvq: error: " << (path.empty() ? "" : path + ": ") << message << " (see kvq "
            << (path.empty() ? "" : path + " ") << "--help)\n";
  return kExitUsage;
}

// An option of the command given that stands before the command's own word ("kvq pq --priority
// 1 push v"), which CLI11 reports as unknown or as missing: its name, or "" if there is none. The
// command words are matched in argv in order, so a value equal to a command's name only makes
// this find nothing.
std::string misplaced_option(const CLI::App& app, int argc, char** argv) {
  const auto chain = given_commands(app);
  if (chain.empty()) return "";
  std::size_t words_seen = 0;
  for (int i = 1; i < argc && words_seen < chain.size(); ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == chain[words_seen]->get_name()) {
      ++words_seen;
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-') continue;
    const std::string name(arg.substr(0, arg.find('=')));
    if (chain.back()->get_option_no_throw(name) != nullptr) return name;
  }
  return "";
}

// A usage error naming `option`, which belongs after the last command word.
int report_misplaced(const CLI::App& app, const std::string& option) {
  return usage_error(app, option + " is an option of '" + given_commands(app).back()->get_name() +
                              "': it goes after that word");
}

// The first argument no command or option took, as a usage error; 0 if there is none.
int report_leftovers(const CLI::App& app, int argc, char** argv) {
  if (app.remaining().empty()) return 0;
  if (const std::string misplaced = misplaced_option(app, argc, argv); !misplaced.empty()) {
    return report_misplaced(app, misplaced);
  }
  const std::string arg = app.remaining().front();  // remaining() returns a copy
  const auto chain = given_commands(app);
  const CLI::App& last = chain.empty() ? app : *chain.back();
  if (arg.size() > 1 && arg[0] == '-') return usage_error(app, "unknown option '" + arg + "'");
  if (!last.get_subcommands({}).empty()) {
    return usage_error(app,
                       "unknown command '" + arg + "' (commands: " + subcommand_names(last) + ")");
  }
  return usage_error(app, "unexpected argument '" + arg + "'");
}

// A usage error if the command line stopped at a command group ("kvq queue"); 0 otherwise.
int report_missing_command(const CLI::App& app) {
  const auto chain = given_commands(app);
  const CLI::App& last = chain.empty() ? app : *chain.back();
  return usage_error(app, "a command is required: " + subcommand_names(last));
}

// Parses the command line; returns the exit status if there is nothing more to do, else -1.
int parse(CLI::App& app, const kvq::cli::Context& ctx, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (const std::string misplaced = misplaced_option(app, argc, argv); !misplaced.empty()) {
      return report_misplaced(app, misplaced);
    }
    return usage_error(app, e.what());
  }
  if (int status = report_leftovers(app, argc, argv)) return status;
  if (!ctx.action) return report_missing_command(app);
  return -1;
}

// Whether `e` says an argument was malformed: a --db URL, a lease token. Both are checked before
// anything is read or written, so they are bad arguments (exit 2) like the ones CLI11 refuses.
bool is_bad_argument(const kvq::Error& e) {
  return e.code() == kvq::ErrorCode::kConnectionStringInvalid ||
         e.code() == kvq::ErrorCode::kInvalidLeaseToken;
}

// Runs the chosen command; every error becomes one line on stderr and its exit status. CliError
// messages name the command themselves; others get it as a prefix ("pq pop-min: timed_out ...").
int run(const CLI::App& app, const kvq::cli::Context& ctx) {
  try {
    return ctx.action();
  } catch (const kvq::cli::CliError& e) {
    std::cerr << "kvq: error: " << e.what() << "\n";
    return e.exit_code();
  } catch (const kvq::Error& e) {  // what() is "name (code): message"
    std::cerr << "kvq: error: " << command_path(given_commands(app)) << ": " << e.what() << "\n";
    return is_bad_argument(e) ? kExitUsage : kvq::cli::kExitError;
  } catch (const std::exception& e) {
    std::cerr << "kvq: error: " << command_path(given_commands(app)) << ": " << e.what() << "\n";
    return kvq::cli::kExitError;
  }
}

// `status`, unless what the command printed could not all be written to stdout (a full disk, a
// closed descriptor): then an error naming why, and kExitError. A popped or taken item is not
// put back: the message says its output may be incomplete.
int checked_output(int status) {
  errno = 0;
  std::cout.flush();
  const bool failed = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (!failed) return status;
  // errno names the cause if this flush met it; an earlier failed write may have left it unset.
  if (!kvq::cli::output_failure_reported()) {
    std::cerr << "kvq: error: " << kvq::cli::output_failure(errno) << "\n";
  }
  return kvq::cli::kExitError;
}

// Builds the command tree, parses the arguments and runs the chosen command.
int run_cli(int argc, char** argv) {
  CLI::App app{kDescription, "kvq"};
  app.fallthrough();  // inherited by every subcommand: global options go anywhere
  // One command per level, inherited too: without it CLI11 hands a word that the command given
  // does not take to its group, which starts that word as a second command, and only the last
  // one ran ("queue peek clear" cleared the queue).
  app.require_subcommand(0, 1);
  kvq::cli::Context ctx;
  kvq::cli::add_global_options(app, ctx);
  kvq::cli::add_queue_commands(app, ctx);
  kvq::cli::add_pq_commands(app, ctx);
  kvq::cli::add_fair_commands(app, ctx);
  kvq::cli::add_dump_command(app, ctx);
  kvq::cli::add_demo_command(app, ctx);
  kvq::cli::add_bench_command(app, ctx);
  kvq::cli::add_simulate_command(app, ctx);
  app.allow_extras();  // only the root collects leftovers; report_leftovers names them
  if (int status = parse(app, ctx, argc, argv); status >= 0) return status;
  return checked_output(run(app, ctx));
}

// Runs guard_standard_descriptors before every constructor, the shared libraries' too (the
// dynamic loader calls the executable's .preinit_array first): gRPC's and abseil's static
// initializers open an eventfd, which took the number of a closed stdin (then read as "Resource
// temporarily unavailable" instead of "stdin, which is closed"), stdout or stderr.
void guard_before_constructors(int /*argc*/, char** /*argv*/, char** /*envp*/) {
  kvq::cli::guard_standard_descriptors();
}
[[gnu::section(".preinit_array"),
  gnu::used]] void (*const kGuardBeforeConstructors)(int, char**,
                                                     char**) = guard_before_constructors;

}  // namespace

int main(int argc, char** argv) {
  // gRPC logs its own view of every failed connection (TLS handshakes, refused ports) to stderr,
  // beside the one-line error kvq prints; a user who wants those logs sets GRPC_VERBOSITY.
  setenv("GRPC_VERBOSITY", "NONE", /*overwrite=*/0);
  // A write to a pipe nobody reads fails with EPIPE, which checked_output reports, instead of
  // SIGPIPE ending kvq without a word after it popped an item.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return run_cli(argc, argv);
  } catch (const std::exception& e) {  // setting up the command tree failed (e.g. out of memory)
    std::fprintf(stderr, "kvq: error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "kvq: error: unknown exception\n");
  }
  return kvq::cli::kExitError;
}
