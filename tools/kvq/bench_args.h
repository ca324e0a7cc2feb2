// What the benchmark programs (bench/*_bench.cc) and `kvq bench` (tools/kvq/cmd_bench.cc,
// bench_clients.cc) share about their arguments and their client threads:
//   - strict numbers: decimal only (std::from_chars over the whole text: no hex, no octal "010",
//     no sign '+', spaces or trailing text, no inf or nan), range-checked, errors naming the
//     argument;
//   - opening the database URL an argument names, a malformed URL being a usage error;
//   - FirstError: the first exception of a group of client threads, rethrown after they joined;
//   - run_main: a program's errors as one line on stderr and its exit status.
//
//   const double seconds = kvq::bench_args::parse_number("--seconds", text, 0.01, 3600);
//   // UsageError: "--seconds: '2x' is not a decimal number"; main prints it and exits 2.
#ifndef KVQ_TOOLS_KVQ_BENCH_ARGS_H_
#define KVQ_TOOLS_KVQ_BENCH_ARGS_H_

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "kvq/database.h"
#include "kvq/error.h"

namespace kvq::bench_args {

// A bad command-line argument; what() names it. A program prints it and exits 2.
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// `v` as the shortest text that reads back as it ("0.01", "3600", "1e+06").
inline std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Why `text` is not a decimal integer in [min, max] ("" if it is one, stored in `out`).
inline std::string integer_error(std::string_view text, long long min, long long max,
                                 long long& out) {
  const std::string quoted = "'" + std::string(text) + "'";
  long long v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  const bool whole = ec == std::errc() && ptr == text.data() + text.size();
  if (!whole && ec != std::errc::result_out_of_range) return quoted + " is not a decimal integer";
  if (!whole || v < min || v > max) {
    return quoted + " is out of range (" + std::to_string(min) + ".." + std::to_string(max) + ")";
  }
  out = v;
  return {};
}

// Why `text` is not a decimal number (digits, an optional fraction and exponent) in [min, max]
// ("" if it is one, stored in `out`).
inline std::string number_error(std::string_view text, double min, double max, double& out) {
  const std::string quoted = "'" + std::string(text) + "'";
  const std::string range =
      " is out of range (" + format_number(min) + ".." + format_number(max) + ")";
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) return quoted + range;
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v)) {
    return quoted + " is not a decimal number";
  }
  if (v < min || v > max) return quoted + range;
  out = v;
  return {};
}

// Why `text` is not a list of decimal integers in [min, max] separated by single commas, at least
// one ("" if it is one, stored in `out`).
inline std::string int_list_error(std::string_view text, int min, int max, std::vector<int>& out) {
  if (text.empty()) return "must not be empty (give numbers separated by commas)";
  std::vector<int> values;
  for (std::size_t pos = 0;;) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    if (item.empty()) {
      return "'" + std::string(text) + "' has an empty item (give numbers separated by commas)";
    }
    long long v = 0;
    if (std::string why = integer_error(item, min, max, v); !why.empty()) {
      return text.find(',') == std::string_view::npos ? why
                                                      : why + " in '" + std::string(text) + "'";
    }
    values.push_back(static_cast<int>(v));
    if (comma == text.size()) break;
    pos = comma + 1;
  }
  out = std::move(values);
  return {};
}

// The throwing forms: UsageError("NAME: why") for what the *_error functions refuse.
inline int parse_int(std::string_view name, std::string_view text, int min, int max) {
  long long v = 0;
  if (std::string why = integer_error(text, min, max, v); !why.empty()) {
    throw UsageError(std::string(name) + ": " + why);
  }
  return static_cast<int>(v);
}

inline long long parse_int64(std::string_view name, std::string_view text, long long min,
                             long long max) {
  long long v = 0;
  if (std::string why = integer_error(text, min, max, v); !why.empty()) {
    throw UsageError(std::string(name) + ": " + why);
  }
  return v;
}

inline double parse_number(std::string_view name, std::string_view text, double min, double max) {
  double v = 0;
  if (std::string why = number_error(text, min, max, v); !why.empty()) {
    throw UsageError(std::string(name) + ": " + why);
  }
  return v;
}

inline std::vector<int> parse_int_list(std::string_view name, std::string_view text, int min,
                                       int max) {
  std::vector<int> v;
  if (std::string why = int_list_error(text, min, max, v); !why.empty()) {
    throw UsageError(std::string(name) + ": " + why);
  }
  return v;
}

// kvq::open(url). A URL kvq cannot read (connection_string_invalid: a malformed URL, an unknown
// scheme or option) throws UsageError naming `name`; other errors (a server that does not answer)
// propagate as kvq::Error.
inline std::shared_ptr<Database> open_url(std::string_view name, const std::string& url) {
  try {
    return kvq::open(url);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kConnectionStringInvalid) throw;
    throw UsageError(std::string(name) + ": " + e.what());
  }
}

// The first exception of a group of threads that share the flag `stop`. Each thread runs its body
// through run(), which keeps the first exception any body throws and sets `stop` so that the other
// threads end; the thread that started them joins them, then calls rethrow().
class FirstError {
 public:
  explicit FirstError(std::atomic<bool>& stop) : stop_(stop) {}

  template <typename Body>
  void run(Body&& body) noexcept {
    try {
      body();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!first_) first_ = std::current_exception();
      stop_ = true;
    }
  }

  // Throws the first exception a body threw, if one did (call after joining the threads).
  void rethrow() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::atomic<bool>& stop_;
  std::mutex mu_;
  std::exception_ptr first_;
};

// A benchmark program's main: returns body()'s exit status, and turns what it throws into one:
// a UsageError is "PROGRAM: message" and `usage` on stderr (exit 2), any other exception (a
// kvq::Error: "name (code): message") "PROGRAM: message" (exit 1).
inline int run_main(const char* program, const char* usage, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\n%s", program, e.what(), usage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

// Sleeps for `seconds`, or until `stop` is set (a client thread failed): polls every 10 ms.
inline void sleep_unless_stopped(const std::atomic<bool>& stop, double seconds) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(seconds));
  for (auto now = Clock::now(); !stop.load() && now < deadline; now = Clock::now()) {
    std::this_thread::sleep_for(
        std::min<Clock::duration>(std::chrono::milliseconds(10), deadline - now));
  }
}

}  // namespace kvq::bench_args

#endif  // KVQ_TOOLS_KVQ_BENCH_ARGS_H_
