// Shared pieces of the kvq CLI (cli.h).
#include "tools/kvq/cli.h"

#include <fcntl.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "common/bytes.h"
#include "tuple/tuple_codec.h"  // FirstInvalidUtf8

namespace kvq::cli {

std::string default_url() {
#ifdef KVQ_WITH_ROCKSDB
  return "rocksdb:./kvq-data";
#else
  return "memory:";
#endif
}

std::string db_option_help() {
  return "database URL: memory:, rocksdb:/dir, etcd://host:port[,host:port]. Default for queue, "
         "pq and dump: $KVQ_DB, else " +
         default_url() +
#ifdef KVQ_WITH_ROCKSDB
         " (a durable database in ./kvq-data, created if missing)"
#else
         " (this build has no RocksDB: data lives for one command)"
#endif
         "; for demo and bench: memory:";
}

std::string Context::database_url() const {
  if (!url.empty()) return url;
  if (const char* env = std::getenv("KVQ_DB"); env && *env) return env;
  return default_url();
}

std::shared_ptr<Database> Context::open() const { return kvq::open(database_url()); }

void add_global_options(CLI::App& app, Context& ctx) {
  app.add_option("--db", ctx.url, db_option_help())->check(NonEmpty());
  app.add_flag("--high-contention", ctx.high_contention,
               "use high-contention (staged) pops for queue, pq and fair commands");
  app.add_option("--max-attempts", ctx.max_attempts,
                 "queue, pq and fair commands: an item delivered this many times goes to the dead "
                 "letters (with nack's --reason) when its lease is nacked or runs out; 0: never")
      ->transform(AtLeast(0));
}

void set_action(CLI::App* command, Context& ctx, std::function<int()> fn) {
  command->callback([&ctx, fn = std::move(fn)] { ctx.action = fn; });
}

namespace {

// Reads `in` to its end, or to one byte past kMaxValueSize (enough to know it is too large).
// Throws CliError(kExitError) naming `command` if reading fails.
std::string read_capped(std::FILE* in, const std::string& command) {
  std::string out;
  char buf[65536];
  while (out.size() <= kMaxValueSize) {
    const std::size_t want = std::min(sizeof buf, kMaxValueSize + 1 - out.size());
    const std::size_t n = std::fread(buf, 1, want, in);
    out.append(buf, n);
    if (n < want) break;
  }
  if (std::ferror(in)) {
    throw CliError(kExitError, command + ": cannot read the value from stdin (" +
                                   std::string(std::strerror(errno)) + "); nothing was pushed");
  }
  return out;
}

std::string too_large_message(const std::string& command, std::size_t index, std::size_t count,
                              bool from_stdin) {
  std::string which = count > 1
                          ? "value " + std::to_string(index + 1) + " of " + std::to_string(count)
                          : "the value";
  if (from_stdin) which += " (read from stdin)";
  return "value_too_large (" + std::to_string(static_cast<int>(ErrorCode::kValueTooLarge)) +
         "): " + command + ": " + which + " is larger than 100,000 bytes; nothing was pushed";
}

}  // namespace

namespace {

bool stdin_was_closed = false;  // guard_standard_descriptors() found descriptor 0 closed

}  // namespace

void guard_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // open() returns the lowest free descriptor: `fd` itself, as the lower ones are open.
    if (::open(fd == 0 ? "/dev/null" : "/dev/full", fd == 0 ? O_RDONLY : O_WRONLY) != fd) return;
    if (fd == 0) stdin_was_closed = true;
  }
}

std::vector<std::string> read_values(const std::vector<std::string>& args, std::FILE* in,
                                     const std::string& command) {
  std::vector<std::string> values;
  bool stdin_used = false;
  for (const auto& arg : args) {
    if (arg != "-") {
      values.push_back(arg);
      continue;
    }
    if (stdin_used) throw CliError(kExitUsage, command + ": '-' (stdin) may be given only once");
    stdin_used = true;
    if (in == stdin && stdin_was_closed) {
      throw CliError(kExitError, command + ": '-' reads the value from stdin, which is closed");
    }
    values.push_back(read_capped(in, command));
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i].size() > kMaxValueSize) {
      const bool from_stdin = args[i] == "-";
      throw CliError(kExitError, too_large_message(command, i, values.size(), from_stdin));
    }
  }
  return values;
}

namespace {

bool output_failed = false;

}  // namespace

std::string output_failure(int errno_value) {
  const std::string why =
      errno_value != 0 ? std::string(" (") + std::strerror(errno_value) + ")" : "";
  return "cannot write to standard output" + why +
         ": what the command printed may be incomplete (a popped or taken item is not put back)";
}

bool output_failure_reported() { return output_failed; }

void emit(std::string_view text) {
  errno = 0;
  std::cout.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::cout.flush();
  if (std::cout && std::fflush(stdout) == 0 && !std::ferror(stdout)) return;
  output_failed = true;
  throw CliError(kExitError, output_failure(errno));
}

int print_value(const std::optional<std::string>& value, bool raw, const std::string& what) {
  if (!value) {
    std::cerr << "kvq: " << what << " is empty\n";
    return kExitEmpty;
  }
  emit(raw ? *value : *value + '\n');
  return kExitOk;
}

void add_pop_flags(CLI::App* pop, PopFlags& flags) {
  auto* raw = pop->add_flag("--raw,-r", flags.raw, "print the value's bytes only, no newline");
  auto* json = pop->add_flag("--json", flags.json,
                             "print each value as a line of JSON: value, or value_base64 for bytes "
                             "that are not UTF-8 (a value with a newline cannot pass for two)");
  auto* timeout =
      pop->add_option("--timeout", flags.timeout_ms,
                      "give up after this long (timed_out, exit 1; with --count, nothing popped): "
                      "500ms, 5s, 1m; default: never")
          ->transform(DurationMs())
          ->check(LongerThanZero());
  auto* wait =
      pop->add_option(
             "--wait", flags.wait_ms,
             "while empty, wait this long for a value (exit 3 if none came): "
             "500ms, 5s, 1m; woken by a watch, not polling. Bounds the wait for the first, and "
             "the batch of the rest (--count) as long again: timed_out (exit 1) if no pop "
             "could commit by then")
          ->transform(DurationMs())
          ->check(LongerThanZero());
  auto* count = pop->add_option("--count,-n", flags.count,
                                "pop up to N values in one transaction, one per line")
                    ->transform(Between(1, 1'000'000));
  timeout->excludes(wait);
  raw->excludes(count);  // raw values would run together with nothing between them
  raw->excludes(json);
}

std::chrono::milliseconds batch_pop_timeout(const PopFlags& flags) {
  return std::chrono::milliseconds(flags.timeout_ms > 0 ? flags.timeout_ms : flags.wait_ms);
}

namespace {

// What print_popped prints for a popped value: a line of JSON with --json, else the value and a
// newline (--raw: its bytes alone).
std::string popped_text(const std::string& value, const PopFlags& flags) {
  if (!flags.json) return flags.raw ? value : value + '\n';
  nlohmann::json j = nlohmann::json::object();
  put_bytes(j, "value", value);
  return json_line(j) + "\n";
}

// Prints the values of one pop batch, as print_popped would one by one, in one write.
void print_batch(const std::vector<std::string>& values, const PopFlags& flags) {
  std::string text;
  for (const std::string& v : values) text += popped_text(v, flags);
  emit(text);
}

}  // namespace

int print_popped(const std::optional<std::string>& value, const PopFlags& flags,
                 const std::string& what) {
  if (!value) return print_value(value, flags.raw, what);
  emit(popped_text(*value, flags));
  return kExitOk;
}

int run_pop(const PopFns& fns, const PopFlags& flags, const std::string& what) {
  std::vector<std::string> values;
  const auto count = static_cast<std::size_t>(flags.count);
  if (flags.wait_ms > 0) {
    const std::optional<std::string> first = fns.wait(std::chrono::milliseconds(flags.wait_ms));
    if (!first) return print_value(std::nullopt, flags.raw, what);
    // Printed before the batch: the value is gone from the queue, and the batch may take long
    // (its commits retried) or be interrupted; if it could not be printed, emit throws and
    // nothing more is popped.
    print_popped(first, flags, what);
    if (count > 1) print_batch(fns.batch(count - 1), flags);
    return kExitOk;
  }
  if (count == 1) {
    if (auto v = fns.timed(std::chrono::milliseconds(flags.timeout_ms))) values.push_back(*v);
  } else {
    values = fns.batch(count);
  }
  if (values.empty()) return print_value(std::nullopt, flags.raw, what);
  print_batch(values, flags);
  return kExitOk;
}

std::string json_line(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
}

void put_bytes(nlohmann::json& obj, const std::string& name, const std::string& bytes) {
  // Valid UTF-8 as RFC 3629 has it (and nlohmann::json's strict dump): the tuple decoder's check.
  if (tuple_codec::FirstInvalidUtf8(bytes) == bytes.size()) {
    obj[name] = bytes;
  } else {
    obj[name + "_base64"] = common::base64(bytes, common::Base64::kStandard);
  }
}

std::int64_t unix_ms(WallClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

nlohmann::json lease_json(const Lease& lease) {
  nlohmann::json j = {{"token", lease.token_text()},
                      {"attempt", lease.attempt},
                      {"deadline_ms", unix_ms(lease.deadline)},
                      {"priority", lease.priority}};
  if (!lease.tenant.empty()) put_bytes(j, "tenant", lease.tenant);
  put_bytes(j, "value", lease.value);
  return j;
}

int print_dead_letters(const std::vector<DeadLetter>& letters, bool json) {
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const DeadLetter& d : letters) {
      nlohmann::json letter = {{"attempts", d.attempts}, {"priority", d.priority}};
      put_bytes(letter, "value", d.value);
      put_bytes(letter, "reason", d.reason);
      j.push_back(std::move(letter));
    }
    std::cout << json_line(j) << "\n";
    return kExitOk;
  }
  for (const DeadLetter& d : letters) {
    std::cout << d.attempts << "\t" << d.priority << "\t" << escape(d.reason) << "\t"
              << escape(d.value) << "\n";
  }
  return kExitOk;
}

std::string escape(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

namespace {

// The value of the hex digit `c`, or -1.
int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Why `s` is not in escape()'s form ("" if it is; its bytes are then in `out`).
std::string parse_escaped(const std::string& s, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
    } else if (i + 1 < s.size() && s[i + 1] == '\\') {
      out += '\\';
      ++i;
    } else if (i + 3 < s.size() && s[i + 1] == 'x' && hex_digit(s[i + 2]) >= 0 &&
               hex_digit(s[i + 3]) >= 0) {
      out += static_cast<char>(hex_digit(s[i + 2]) * 16 + hex_digit(s[i + 3]));
      i += 3;
    } else {
      return "malformed escape at byte " + std::to_string(i + 1) +
             ": a backslash starts \\\\ (a backslash) or \\xNN (the byte NN, two hex digits)";
    }
  }
  return {};
}

}  // namespace

std::string unescape(const std::string& s) {
  std::string out;
  if (std::string error = parse_escaped(s, out); !error.empty()) throw CliError(kExitUsage, error);
  return out;
}

CLI::Validator Unescaped() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::string out;
        std::string error = parse_escaped(s, out);
        if (error.empty()) s = std::move(out);
        return error;
      },
      "ESCAPED");
}

}  // namespace kvq::cli
