// What every `kvq` command shares: exit codes, the global options (Context), the one error type the
// CLI throws itself (CliError), CLI11 validators for the argument kinds (int64, durations,
// non-empty strings), and reading/printing values (`-` = stdin, binary safe).
//
// A command group registers its subcommands on the root CLI::App with add_*_commands(app, ctx)
// (commands.h); each leaf subcommand sets ctx.action, which main() runs after parsing.
#ifndef KVQ_TOOLS_KVQ_CLI_H_
#define KVQ_TOOLS_KVQ_CLI_H_

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kvq/kvq.h"

namespace kvq::cli {

// Exit statuses (README.md, `kvq --help`).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;  // a kvq error (kvq::Error), or a failed check (demo)
inline constexpr int kExitUsage = 2;  // bad arguments: nothing was opened or written
inline constexpr int kExitEmpty = 3;  // pop/peek on an empty queue

// An error the CLI reports itself: main() prints "kvq: error: " + what() as one line and exits
// with exit_code().
class CliError : public std::runtime_error {
 public:
  CliError(int exit_code, const std::string& message)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const noexcept { return exit_code_; }

 private:
  int exit_code_;
};

// The global options and the command chosen on the command line.
struct Context {
  std::string url;               // --db; empty = not given
  bool high_contention = false;  // --high-contention (queue, pq and fair commands)
  int max_attempts = 0;          // --max-attempts (queue, pq and fair commands; 0: no limit)
  std::function<int()> action;   // set by the leaf subcommand that was given; returns the exit code
  // The URL queue/pq/dump use: --db, else $KVQ_DB if set and non-empty, else default_url().
  std::string database_url() const;
  // --db, else "memory:" (demo and bench default to a fresh in-memory database).
  std::string url_or_memory() const { return url.empty() ? "memory:" : url; }
  // kvq::open(database_url()). Throws what kvq::open throws.
  std::shared_ptr<Database> open() const;
};

// The URL used when neither --db nor $KVQ_DB is given: rocksdb:./kvq-data if the RocksDB engine is
// built, else memory:.
std::string default_url();
// The help text of --db.
std::string db_option_help();

// Registers --db, --high-contention and --max-attempts on `app`.
void add_global_options(CLI::App& app, Context& ctx);
// Makes `fn` the action run when `command` is the (leaf) subcommand given.
void set_action(CLI::App* command, Context& ctx, std::function<int()> fn);

// Validators. Int64(): a decimal int64 (no overflow, no trailing text). Uint64(): the same for a
// uint64 (no sign). NonEmpty(): not "". StructureName(): not "", and UTF-8 (a name is a tuple
// string).
CLI::Validator Int64();
CLI::Validator Uint64();
CLI::Validator NonEmpty();
CLI::Validator StructureName();
// A decimal int64 >= `min` (messages as Int64(), or "must be >= min, not S").
CLI::Validator AtLeast(std::int64_t min);
// A decimal int64 in [min, max] (messages as AtLeast, or "must be <= max, not S").
CLI::Validator Between(std::int64_t min, std::int64_t max);
// A duration with a unit (ms, s, m), converted to milliseconds: "500ms", "5s", "2m".
CLI::Validator DurationMs();
// After DurationMs(): refuses 0 ("must be longer than 0ms"), for durations where 0 means nothing
// (--vt, --timeout, --wait).
CLI::Validator LongerThanZero();
// Adds --delay to `command`: a duration >= 0 (DurationMs) into `delay_ms`, described by `help`.
void add_delay_option(CLI::App* command, std::int64_t& delay_ms, const std::string& help);
// Adds --vt to `command`: a duration > 0 (DurationMs) into `vt_ms`, its default shown.
void add_vt_option(CLI::App* command, std::int64_t& vt_ms, const std::string& help);
// Adds the positional `token` (required): a lease token as `take` printed it.
void add_token_arg(CLI::App* command, std::string& token);
// Adds the positional list `value` (required, at least one) to `command`: every argument that is
// not an option, and all after a `--` (which may also come after the first value), as given:
// "[a,b]" is one value, not CLI11's list of two.
void add_values_arg(CLI::App* command, std::vector<std::string>& values);

// Opens /dev/null (stdin) or /dev/full (stdout, stderr) on those of descriptors 0-2 the caller
// closed, before anything else is opened: otherwise the first files kvq opens (RocksDB's) would
// get those numbers, and what kvq prints would be written into them. A write to a closed stdout
// then fails (and is reported: main's output check), and read_values refuses a closed stdin.
void guard_standard_descriptors();

// The value an argument stands for: `arg` itself, or for "-" the whole of `in` (binary safe).
// Throws CliError(kExitError) with value_too_large's name if the value is over kMaxValueSize
// (reading stops just past the limit), CliError(kExitUsage) if "-" appears more than once, and
// CliError(kExitError) if `in` cannot be read (or is stdin and was closed by the caller).
// `command` ("queue push") names the command in messages.
std::vector<std::string> read_values(const std::vector<std::string>& args, std::FILE* in,
                                     const std::string& command);

// Writes `text` to stdout and flushes it; throws CliError(kExitError) with output_failure() if it
// could not all be written. The printers of popped and taken items use it: an item leaves the
// process as soon as it is printed, and a command stops popping or taking once stdout failed.
void emit(std::string_view text);
// The message for output that could not be written, `errno_value` naming why (0: not known):
// what the command printed may be incomplete, and a popped or taken item is not put back.
std::string output_failure(int errno_value);
// Whether emit() already threw output_failure() (so that it is reported once).
bool output_failure_reported();

// Prints `value` and a newline (raw: the value's bytes only) to stdout (emit) and returns kExitOk;
// for nullopt prints "kvq: <what> is empty" to stderr and returns kExitEmpty.
int print_value(const std::optional<std::string>& value, bool raw, const std::string& what);

// The flags of `queue pop`, `pq pop-min` and `pq pop-max`.
struct PopFlags {
  bool raw = false;
  bool json = false;            // --json: each value as a line of JSON (print_popped)
  std::int64_t timeout_ms = 0;  // --timeout: a single pop that gives up (timed_out) after this
  std::int64_t wait_ms = 0;     // --wait: block this long for a value while empty (0 = don't)
  int count = 1;                // --count: up to this many values, in one pop batch
};
// What one pop command runs on its structure: a pop with a timeout, a blocking wait, a batch.
struct PopFns {
  std::function<std::optional<std::string>(std::chrono::milliseconds)> timed, wait;
  std::function<std::vector<std::string>(std::size_t)> batch;
};
// Registers --raw, --json, --timeout, --wait and --count on `pop` (--timeout excludes --wait;
// --raw excludes --json and --count).
void add_pop_flags(CLI::App* pop, PopFlags& flags);
// What bounds a pop command's batch (--count), as QueueOptions::pop_timeout: --timeout, else
// --wait (the batch of the rest after the first value), else nothing (0).
std::chrono::milliseconds batch_pop_timeout(const PopFlags& flags);
// Prints a popped value as `flags` say: with --json a line {"value": ...} (put_bytes), else as
// print_value does (and for nullopt, as print_value does).
int print_popped(const std::optional<std::string>& value, const PopFlags& flags,
                 const std::string& what);
// Runs a pop command and prints each value as print_popped does; kExitEmpty if none. With --wait
// the first value is waited for (pop_wait, which throws timed_out if no attempt could commit in
// time) and printed, then up to count - 1 more follow in one pop batch; without, up to count
// values in one pop batch (count 1: a single pop, with --timeout if given). The batch is bounded
// as the structure's pop_timeout says (open it with batch_pop_timeout(flags)).
int run_pop(const PopFns& fns, const PopFlags& flags, const std::string& what);

// `j` as one line of JSON, as every --json prints it. Throws nlohmann::json::type_error for a
// string that is not valid UTF-8 (never silently replaced): user bytes go in with put_bytes.
std::string json_line(const nlohmann::json& j);
// Puts user bytes (a value, a tenant, a reason) into the JSON object `obj` so that they come back
// exactly: as obj[name], a string, if `bytes` are valid UTF-8 (RFC 3629); else as
// obj[name + "_base64"], their standard base64 (RFC 4648, padded). Exactly one of the two is set.
void put_bytes(nlohmann::json& obj, const std::string& name, const std::string& bytes);
// Milliseconds since the Unix epoch of `t` (how deadlines print).
std::int64_t unix_ms(WallClock::time_point t);
// A lease as take --json prints it: token, attempt, deadline_ms, priority, the tenant (a fair
// queue's lease only) and the value (tenant and value as put_bytes puts them).
nlohmann::json lease_json(const Lease& lease);
// Prints dead letters one a line (attempts, priority, reason, value; tab-separated, escaped) or,
// with `json`, as one JSON array (value and reason as put_bytes puts them); returns kExitOk.
int print_dead_letters(const std::vector<DeadLetter>& letters, bool json);

// `s` with each byte outside printable ASCII as \xNN (two lowercase hex digits) and each backslash
// as \\ (one line: dump, dead-letters, fair pop/take/stats). unescape() is its exact inverse.
std::string escape(const std::string& s);
// The bytes `s` stands for in escape()'s form: \\ is a backslash, \xNN (two hex digits, either
// case) the byte NN; every other byte is itself. So unescape(escape(b)) == b for any bytes b, and
// text without a backslash is unchanged. Throws CliError(kExitUsage) naming the first malformed
// escape (a backslash followed by anything else, or \x without two hex digits).
std::string unescape(const std::string& s);
// A CLI11 transform taking an argument in escape()'s form to its bytes (unescape), for arguments
// that name what the CLI prints escaped (--tenant); a malformed escape is a usage error.
CLI::Validator Unescaped();

}  // namespace kvq::cli

#endif  // KVQ_TOOLS_KVQ_CLI_H_
