// Internal: parsing of the database URLs kvq::open() accepts ("scheme:body?key=value&...").
#ifndef KVQ_SRC_OPEN_URL_H_
#define KVQ_SRC_OPEN_URL_H_

#include <map>
#include <string>
#include <string_view>

namespace kvq::detail {

struct ParsedUrl {
  std::string scheme;                        // "memory", "rocksdb", "etcd"
  std::string body;                          // between "scheme:" and "?" ("/path", "//h:p,h:p")
  std::map<std::string, std::string> query;  // the query parameters, each key at most once
};

// Splits `url`. Throws connection_string_invalid if there is no "scheme:", the scheme has
// characters other than [a-z0-9+.-], or the query is malformed (empty key, key without '=',
// duplicate key).
ParsedUrl parse_url(std::string_view url);

// Throws connection_string_invalid naming the first key left in `query` (an unknown option).
void reject_unknown_options(const ParsedUrl& url, const std::map<std::string, std::string>& query);

}  // namespace kvq::detail

#endif  // KVQ_SRC_OPEN_URL_H_
