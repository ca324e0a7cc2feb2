// kvq::open(url): dispatch on the URL scheme to an engine.
#include <map>
#include <memory>
#include <string>

#include "kvq/database.h"
#include "src/engine/memory/memory_store.h"
#include "src/open_url.h"
#include "src/txn/commit_pipeline.h"

// Optional engines declare their factories in these headers:
//   std::shared_ptr<engine::Engine> engine::open_rocksdb(const std::string& path,
//                                                        std::map<std::string, std::string> query);
//   std::shared_ptr<engine::Engine> engine::open_etcd(const std::string& endpoints,
//                                                     std::map<std::string, std::string> query);
// They are compiled in when CMake's KVQ_WITH_ROCKSDB / KVQ_WITH_ETCD options are on.
#ifdef KVQ_WITH_ROCKSDB
#include "src/engine/rocksdb/rocksdb_engine.h"
#endif
#ifdef KVQ_WITH_ETCD
#include "src/engine/etcd/etcd_engine.h"
#endif

namespace kvq {
namespace detail {

namespace {
[[noreturn]] void invalid(std::string_view url, const std::string& why) {
  throw Error(ErrorCode::kConnectionStringInvalid,
              "'" + std::string(url) + "': " + why +
                  " (expected memory:, rocksdb:/path or etcd://host:port[,host:port])");
}
}  // namespace

ParsedUrl parse_url(std::string_view url) {
  ParsedUrl out;
  const std::size_t colon = url.find(':');
  if (colon == std::string_view::npos || colon == 0) invalid(url, "no scheme");
  for (char ch : url.substr(0, colon)) {
    const bool ok =
        (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '+' || ch == '-' || ch == '.';
    if (!ok) invalid(url, "malformed scheme");
  }
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

}  // namespace detail

std::shared_ptr<Database> open(std::string_view url) {
  detail::ParsedUrl parsed = detail::parse_url(url);

  if (parsed.scheme == "memory") {
    if (!parsed.body.empty()) {
      throw Error(ErrorCode::kConnectionStringInvalid,
                  "'" + std::string(url) + "': memory: takes no path (use \"memory:\")");
    }
    std::map<std::string, std::string> query = parsed.query;
    txn::PipelineOptions options = txn::pipeline_options_from_query(query);
    detail::reject_unknown_options(parsed, query);
    return std::make_shared<Database>(
        txn::make_pipeline_engine(std::make_unique<engine::MemoryStore>(), options),
        std::string(url));
  }

  if (parsed.scheme == "rocksdb") {
    if (parsed.body.empty()) {
      throw Error(ErrorCode::kConnectionStringInvalid,
                  "'" + std::string(url) + "': expected rocksdb:/path/to/dir");
    }
#ifdef KVQ_WITH_ROCKSDB
    // Dispatch point for the RocksDB engine: engine::open_rocksdb(path, query) returns a
    // std::shared_ptr<engine::Engine> (built with txn::make_pipeline_engine).
    return std::make_shared<Database>(engine::open_rocksdb(parsed.body, parsed.query),
                                      std::string(url));
#else
    throw Error(
        ErrorCode::kConnectionStringInvalid,
        "'" + std::string(url) + "': this kvq was built without RocksDB (KVQ_WITH_ROCKSDB)");
#endif
  }

  if (parsed.scheme == "etcd") {
    if (parsed.body.rfind("//", 0) != 0 || parsed.body.size() == 2) {
      throw Error(ErrorCode::kConnectionStringInvalid,
                  "'" + std::string(url) + "': expected etcd://host:port[,host:port]");
    }
#ifdef KVQ_WITH_ETCD
    // Dispatch point for the etcd engine: engine::open_etcd(endpoints, query), endpoints being
    // "host:port[,host:port]" (the body without its leading "//").
    return std::make_shared<Database>(engine::open_etcd(parsed.body.substr(2), parsed.query),
                                      std::string(url));
#else
    throw Error(ErrorCode::kConnectionStringInvalid,
                "'" + std::string(url) + "': this kvq was built without etcd (KVQ_WITH_ETCD)");
#endif
  }

  throw Error(ErrorCode::kConnectionStringInvalid,
              "'" + std::string(url) + "': unknown scheme '" + parsed.scheme +
                  "' (expected memory:, rocksdb:/path or etcd://host:port[,host:port])");
}

}  // namespace kvq
