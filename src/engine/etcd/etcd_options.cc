#include "engine/etcd/etcd_options.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "common/url.h"
#include "kvq/error.h"

namespace kvq::engine::etcd {
namespace {

// Bytes a Txn may spend per operation beyond the prefix and what approximate_size() counts.
constexpr std::size_t kPerOperationOverhead = 128;

// What the framing of a commit may take of max_request_bytes (see transaction_limits).
std::size_t framing_overhead(const EtcdOptions& options) {
  return kRaftRequestFraming + static_cast<std::size_t>(options.max_txn_ops) *
                                   (2 * options.prefix.size() + kPerOperationOverhead);
}

bool parse_int(std::string_view text, long long& out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// One parse of one URL; every error names the URL and the expected form.
class UrlParser {
 public:
  explicit UrlParser(std::string_view url) : url_(url) {}

  EtcdOptions parse() {
    const bool tls = url_.substr(0, 8) == "etcds://";
    if (!tls && url_.substr(0, 7) != "etcd://") throw bad("must start with etcd:// or etcds://");
    std::string_view rest = url_.substr(tls ? 8 : 7);
    std::string_view query;
    if (auto q = rest.find('?'); q != std::string_view::npos) {
      query = rest.substr(q + 1);
      rest = rest.substr(0, q);
    }
    SecurityParser security(tls, [this](const std::string& why) { return bad(why); });
    if (auto at = rest.rfind('@'); at != std::string_view::npos) {
      security.userinfo(rest.substr(0, at));
      rest = rest.substr(at + 1);
    }
    EtcdOptions options;
    parse_endpoints(rest, options);
    parse_query(query, options, security);
    check_request_bytes(options);
    options.security = security.finish();
    return options;
  }

 private:
  Error bad(const std::string& why) const {
    return Error(ErrorCode::kConnectionStringInvalid,
                 "etcd URL '" + detail::redact_url_for_error(url_) + "': " + why +
                     " (expected etcd[s]://[user:password@]host:port[,host:port...]"
                     "[?option=value&...])");
  }

  // An endpoint as an error message shows it: quoted, unless an '@' after the '?' means that the
  // endpoints may hold a password cut at a '?' it holds (written without percent-encoding).
  std::string quoted(std::string_view endpoint) const {
    if (!detail::userinfo_may_hold_query_mark(url_)) return "'" + std::string(endpoint) + "'";
    return "(not shown: the URL has an '@' after its '?'; write a '?' in a password as %3F)";
  }

  void parse_endpoints(std::string_view list, EtcdOptions& options) const {
    for (;;) {
      const std::size_t comma = list.find(',');
      parse_endpoint(list.substr(0, comma), options);
      if (comma == std::string_view::npos) return;
      list = list.substr(comma + 1);
    }
  }

  void parse_endpoint(std::string_view ep, EtcdOptions& options) const {
    const std::size_t colon = ep.rfind(':');
    if (ep.empty() || colon == std::string_view::npos || colon == 0) {
      throw bad("endpoint " + quoted(ep) + " is not host:port");
    }
    long long port = 0;
    if (!parse_int(ep.substr(colon + 1), port) || port < 1 || port > 65535) {
      throw bad("bad port in " + quoted(ep));
    }
    if (!valid_host(ep.substr(0, colon))) {
      throw bad("bad host in " + quoted(ep) +
                " (a name, an IPv4 address, or an IPv6 address in brackets: [::1]:2379)");
    }
    options.endpoints.emplace_back(ep);
  }

  // A host name or IPv4 address (letters, digits, '.', '-', '_'), or an IPv6 address in brackets
  // (hex digits, ':' and '.'). Nothing else: gRPC reads a bare "::1:1" as another address and
  // port than the ones meant.
  static bool valid_host(std::string_view host) {
    const auto made_of = [](std::string_view s, auto&& allowed) {
      return !s.empty() && std::all_of(s.begin(), s.end(), [&](char c) {
        return allowed(static_cast<unsigned char>(c));
      });
    };
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      const std::string_view address = host.substr(1, host.size() - 2);
      return address.find(':') != std::string_view::npos && made_of(address, [](unsigned char c) {
               return std::isxdigit(c) || c == ':' || c == '.';
             });
    }
    return made_of(
        host, [](unsigned char c) { return std::isalnum(c) || c == '.' || c == '-' || c == '_'; });
  }

  void parse_query(std::string_view query, EtcdOptions& options, SecurityParser& security) const {
    while (!query.empty()) {
      const std::size_t amp = query.find('&');
      const std::string_view item = query.substr(0, amp);
      const std::size_t eq = item.find('=');
      if (eq == std::string_view::npos) throw bad("option '" + std::string(item) + "' lacks '='");
      if (!security.option(item.substr(0, eq), item.substr(eq + 1))) {
        apply_option(item.substr(0, eq), item.substr(eq + 1), options);
      }
      if (amp == std::string_view::npos) return;
      query = query.substr(amp + 1);
    }
  }

  void apply_option(std::string_view name, std::string_view value, EtcdOptions& options) const {
    if (name == "prefix") {
      if (value.empty()) throw bad("prefix must not be empty");
      options.prefix = std::string(value);
    } else if (name == "fast_first_read") {
      if (value != "0" && value != "1") throw bad("fast_first_read must be 0 or 1");
      options.fast_first_read = value == "1";
    } else if (name == "timeout_ms") {
      options.rpc_timeout = std::chrono::milliseconds(positive(name, value, 86'400'000));
    } else if (name == "failover_ms") {
      options.failover_budget = std::chrono::milliseconds(positive(name, value, 86'400'000));
    } else if (name == "mvcc_window_ms") {
      // 0: off, as when the option is not given.
      options.mvcc_window = std::chrono::milliseconds(at_most(name, value, 86'400'000, 0));
    } else if (name == "max_txn_ops") {
      options.max_txn_ops = static_cast<int>(positive(name, value, 1'000'000));
    } else if (name == "max_request_bytes") {
      options.max_request_bytes = static_cast<std::size_t>(positive(name, value, 2'147'483'647));
    } else {
      throw bad("unknown option '" + std::string(name) + "'");
    }
  }

  long long positive(std::string_view name, std::string_view value, long long max) const {
    return at_most(name, value, max, 1);
  }

  // `value` as an integer in [min, max].
  long long at_most(std::string_view name, std::string_view value, long long max,
                    long long min) const {
    long long n = 0;
    if (!parse_int(value, n) || n < min || n > max) {
      throw bad("option " + std::string(name) + " needs " +
                (min > 0 ? "a positive integer" : "an integer from " + std::to_string(min)) +
                " up to " + std::to_string(max));
    }
    return n;
  }

  void check_request_bytes(const EtcdOptions& options) const {
    const std::size_t overhead = framing_overhead(options);
    if (options.max_request_bytes <= overhead) {
      throw bad("max_request_bytes=" + std::to_string(options.max_request_bytes) +
                " leaves no room for data: the framing of max_txn_ops=" +
                std::to_string(options.max_txn_ops) + " operations may take " +
                std::to_string(overhead) + " bytes");
    }
  }

  std::string_view url_;
};

}  // namespace

TransactionLimits transaction_limits(const EtcdOptions& options) {
  TransactionLimits limits;
  limits.max_operations = static_cast<std::size_t>(options.max_txn_ops);
  const std::size_t overhead = framing_overhead(options);
  limits.max_bytes = options.max_request_bytes > overhead
                         ? std::min(options.max_request_bytes - overhead, kMaxTransactionSize)
                         : 0;
  return limits;
}

EtcdOptions parse_etcd_url(std::string_view url) { return UrlParser(url).parse(); }

}  // namespace kvq::engine::etcd
