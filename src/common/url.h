// Internal: parsing of the database URLs kvq::open() accepts ("scheme:body?key=value&...").
#ifndef KVQ_SRC_OPEN_URL_H_
#define KVQ_SRC_OPEN_URL_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kvq::detail {

struct ParsedUrl {
  std::string scheme;                        // "memory", "rocksdb", "etcd", "etcds"
  std::string body;                          // between "scheme:" and "?" ("/path", "//h:p,h:p")
  std::map<std::string, std::string> query;  // the query parameters, each key at most once
};

// Splits `url`. Throws connection_string_invalid if there is no "scheme:", the scheme has
// characters other than [a-z0-9+.-], or the query is malformed (empty key, key without '=',
// duplicate key). Error messages show the URL as redact_url does.
ParsedUrl parse_url(std::string_view url);

// Throws connection_string_invalid naming the first key left in `query` (an unknown option).
void reject_unknown_options(const ParsedUrl& url, const std::map<std::string, std::string>& query);

// `url` with the password of a "scheme://user:password@host..." (or "scheme:user:password@...",
// a URL missing its "//") replaced by "***", as the URL parsers read the user information (up to
// the last '@' before the first '?'); for Database::url(). URLs without a password come back
// unchanged.
//   redact_url("etcds://root:pw@h:1?x=1") == "etcds://root:***@h:1?x=1"
std::string redact_url(std::string_view url);
// As redact_url, for the error message of a URL that may not parse: if an '@' follows the first
// '?', that '?' may be part of a password written without percent-encoding, so the text up to
// the last '@' is hidden too (also in a URL that has none, e.g. "?prefix=a@b": it cannot tell).
//   redact_url_for_error("etcds://root:p?w@h:1") == "etcds://root:***@h:1"
std::string redact_url_for_error(std::string_view url);
// True if an '@' follows the first '?' of `url`: the text before that '?' may hold a part of a
// password, so error messages must not quote it.
bool userinfo_may_hold_query_mark(std::string_view url);

// Decodes %XX escapes (RFC 3986 percent-encoding; '+' stays '+'). nullopt if a '%' is not
// followed by two hex digits.
//   percent_decode("a%40b") == "a@b"
std::optional<std::string> percent_decode(std::string_view text);

}  // namespace kvq::detail

#endif  // KVQ_SRC_OPEN_URL_H_
