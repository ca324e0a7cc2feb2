// The argument validators and option helpers of the kvq CLI (declared in cli.h).
#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "tools/kvq/cli.h"
#include "tuple/tuple_codec.h"  // FirstInvalidUtf8

namespace kvq::cli {

namespace {

// Why `s` is not a decimal integer of type T, whose name is `type` ("" if it is one, stored in
// `v`). Unsigned types take no sign.
template <typename T>
std::string parse_integer(const std::string& s, T& v, const char* type) {
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (ec == std::errc::result_out_of_range) return "'" + s + "' is out of the " + type + " range";
  if (ec != std::errc() || ptr != end) {
    return "'" + s + "' is not " + (std::is_signed_v<T> ? "an integer" : "a whole number >= 0");
  }
  return {};
}

std::string parse_int64(const std::string& s, std::int64_t& v) {
  return parse_integer(s, v, "int64");
}

}  // namespace

// The validators below leave the number they accept in its canonical decimal form: CLI11's own
// conversion, which runs after them, reads "010" as octal 8 and "0x10" as 16.

CLI::Validator Int64() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::int64_t v = 0;
        std::string error = parse_int64(s, v);
        if (error.empty()) s = std::to_string(v);
        return error;
      },
      "INT64");
}

CLI::Validator Uint64() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::uint64_t v = 0;
        std::string error = parse_integer(s, v, "uint64");
        if (error.empty()) s = std::to_string(v);
        return error;
      },
      "UINT64");
}

CLI::Validator AtLeast(std::int64_t min) {
  return Between(min, std::numeric_limits<std::int64_t>::max());
}

CLI::Validator Between(std::int64_t min, std::int64_t max) {
  const std::string name = max == std::numeric_limits<std::int64_t>::max()
                               ? ">=" + std::to_string(min)
                               : std::to_string(min) + ".." + std::to_string(max);
  return CLI::Validator(
      [min, max](std::string& s) -> std::string {
        std::int64_t v = 0;
        std::string error = parse_int64(s, v);
        if (error.empty() && v < min) error = "must be >= " + std::to_string(min) + ", not " + s;
        if (error.empty() && v > max) error = "must be <= " + std::to_string(max) + ", not " + s;
        if (error.empty()) s = std::to_string(v);
        return error;
      },
      name);
}

CLI::Validator NonEmpty() {
  return CLI::Validator(
      [](std::string& s) -> std::string { return s.empty() ? "must not be empty" : ""; },
      "NONEMPTY");
}

CLI::Validator StructureName() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.empty()) return "must not be empty";
        const std::size_t bad = tuple_codec::FirstInvalidUtf8(s);
        if (bad == s.size()) return "";
        return "must be UTF-8 (byte " + std::to_string(bad) + " is not)";
      },
      "NAME");
}

namespace {

// Why `s` is not a duration as DurationMs() takes it ("" if it is one, stored in `ms`).
std::string parse_duration_ms(const std::string& s, std::int64_t& ms) {
  const std::size_t digits = s.find_first_not_of("0123456789");
  const std::string unit = digits == std::string::npos ? "" : s.substr(digits);
  const std::map<std::string, std::int64_t> per_unit{{"ms", 1}, {"s", 1000}, {"m", 60'000}};
  const auto it = per_unit.find(unit);
  if (!s.empty() && s[0] == '-') return "must not be negative, not " + s;
  if (s.empty() || digits == 0 || unit[0] == '.') {
    return "'" + s + "' is not a whole number with a unit (500ms, 5s, 2m)";
  }
  if (unit.empty()) return "Missing mandatory unit (ms, s or m): " + s;
  if (it == per_unit.end()) return "unknown unit '" + unit + "' (ms, s or m): " + s;
  std::int64_t n = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + digits, n);
  const std::int64_t max_ms = kMaxWorkDuration.count();
  if (ec != std::errc() || n > max_ms / it->second) {
    return "must be at most 10 years (" + std::to_string(max_ms) + "ms), not " + s;
  }
  ms = n * it->second;
  return {};
}

}  // namespace

CLI::Validator DurationMs() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::int64_t ms = 0;
        std::string error = parse_duration_ms(s, ms);
        if (error.empty()) s = std::to_string(ms);
        return error;
      },
      "DURATION");
}

void add_delay_option(CLI::App* command, std::int64_t& delay_ms, const std::string& help) {
  command->add_option("--delay", delay_ms, help)->transform(DurationMs());
}

CLI::Validator LongerThanZero() {
  return CLI::Validator(
      [](std::string& s) -> std::string { return s == "0" ? "must be longer than 0ms" : ""; },
      ">0");
}

void add_vt_option(CLI::App* command, std::int64_t& vt_ms, const std::string& help) {
  command->add_option("--vt", vt_ms, help)
      ->transform(DurationMs())
      ->check(LongerThanZero())
      ->default_str(std::to_string(vt_ms) + "ms");  // as --vt takes it: with its unit
}

void add_token_arg(CLI::App* command, std::string& token) {
  command->add_option("token", token, "the lease token `take` printed")->required();
}

void add_values_arg(CLI::App* command, std::vector<std::string>& values) {
  // CLI11 (2.1) keeps a positional list going while it has fewer values than its minimum, or
  // else while it allows extra values; the latter also splits "[a,b]" into a and b (dropping
  // empty items), and lets a later `--` end the list and hand what follows back to the parent
  // command as options. A minimum as large as the list's maximum, with no extra values, keeps the
  // list going without either; TakeAll skips the check of that minimum after parsing (the
  // required() check still wants one value).
  constexpr int kMany = CLI::detail::expected_max_vector_size;
  command->add_option("value", values, "values to push; '-' reads one value from stdin")
      ->required()
      ->allow_extra_args(false)
      ->expected(kMany, kMany)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

}  // namespace kvq::cli
