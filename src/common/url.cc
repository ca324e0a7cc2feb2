#include "common/url.h"

#include <algorithm>

#include "kvq/error.h"

namespace kvq::detail {

namespace {
[[noreturn]] void invalid(std::string_view url, const std::string& why) {
  throw Error(ErrorCode::kConnectionStringInvalid,
              "'" + redact_url_for_error(url) + "': " + why +
                  " (expected memory:, rocksdb:/path or etcd[s]://host:port[,host:port])");
}

int hex_digit(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}
}  // namespace

namespace {

// A scheme as parse_url accepts it: one or more of [a-z0-9+.-].
bool well_formed_scheme(std::string_view scheme) {
  return !scheme.empty() && std::all_of(scheme.begin(), scheme.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '+' || ch == '-' ||
           ch == '.';
  });
}

// Where the part after "scheme:" and its slashes starts in `url` (0 if it has no well-formed
// scheme: then a password may follow the first ':').
std::size_t after_scheme(std::string_view url) {
  const std::size_t colon = url.find(':');
  if (colon == std::string_view::npos || !well_formed_scheme(url.substr(0, colon))) return 0;
  const std::size_t start = url.find_first_not_of('/', colon + 1);
  return start == std::string_view::npos ? url.size() : start;
}

// `url` with the text between the first ':' after `start` and `at` (an '@') replaced by "***";
// unchanged if there is no such ':' (a user name without a password).
std::string hide_password(std::string_view url, std::size_t start, std::size_t at) {
  const std::size_t colon = url.substr(0, at).find(':', start);
  if (colon == std::string_view::npos) return std::string(url);
  return std::string(url.substr(0, colon + 1)) + "***" + std::string(url.substr(at));
}

}  // namespace

std::string redact_url(std::string_view url) {
  const std::size_t start = after_scheme(url);
  // The user information ends at the last '@' before the query.
  const std::size_t at = url.substr(0, url.find('?', start)).rfind('@');
  if (at == std::string_view::npos || at < start) return std::string(url);
  return hide_password(url, start, at);
}

std::string redact_url_for_error(std::string_view url) {
  const std::size_t start = after_scheme(url);
  const std::size_t query = url.find('?', start);
  const std::size_t at = url.rfind('@');
  if (query == std::string_view::npos || at == std::string_view::npos || at < query) {
    return redact_url(url);
  }
  return hide_password(url, start, at);
}

bool userinfo_may_hold_query_mark(std::string_view url) {
  const std::size_t query = url.find('?', after_scheme(url));
  return query != std::string_view::npos && url.find('@', query) != std::string_view::npos;
}

std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;  // fewer than two characters follow
    const int high = hex_digit(text[i + 1]);
    const int low = hex_digit(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

ParsedUrl parse_url(std::string_view url) {
  ParsedUrl out;
  const std::size_t colon = url.find(':');
  if (colon == std::string_view::npos || colon == 0) invalid(url, "no scheme");
  if (!well_formed_scheme(url.substr(0, colon))) invalid(url, "malformed scheme");
  out.scheme = std::string(url.substr(0, colon));
  std::string_view rest = url.substr(colon + 1);
  const std::size_t q = rest.find('?');
  out.body = std::string(rest.substr(0, q));
  if (q == std::string_view::npos) return out;
  std::string_view query = rest.substr(q + 1);
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    std::string_view item = query.substr(0, amp);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) invalid(url, "malformed query parameter");
    std::string key(item.substr(0, eq));
    if (!out.query.emplace(key, std::string(item.substr(eq + 1))).second) {
      invalid(url, "query parameter '" + key + "' given twice");
    }
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
    if (query.empty()) invalid(url, "trailing '&'");
  }
  return out;
}

void reject_unknown_options(const ParsedUrl& url, const std::map<std::string, std::string>& query) {
  if (!query.empty()) {
    throw Error(ErrorCode::kConnectionStringInvalid,
                "unknown option '" + query.begin()->first + "' for scheme '" + url.scheme + "'");
  }
}

}  // namespace kvq::detail
