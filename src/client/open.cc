// kvq::open(url): dispatch on the URL scheme to an engine.
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/url.h"
#include "engine/memory/memory_store.h"
#include "engine/pipeline/commit_pipeline.h"
#include "engine/testing/fault_injection.h"
#include "kvq/database.h"

// Optional engines declare their factories in these headers:
//   std::shared_ptr<engine::Engine> engine::open_rocksdb(const std::string& path,
//                                                        std::map<std::string, std::string> query);
//   std::shared_ptr<engine::Engine> engine::open_etcd(bool tls, const std::string& endpoints,
//                                                     std::map<std::string, std::string> query);
// They are compiled in when CMake's KVQ_WITH_ROCKSDB / KVQ_WITH_ETCD options are on.
#ifdef KVQ_WITH_ROCKSDB
#include "engine/rocksdb/rocksdb_engine.h"
#endif
#ifdef KVQ_WITH_ETCD
#include "engine/etcd/etcd_engine.h"
#endif

namespace kvq {

namespace {

[[noreturn]] void invalid_url(std::string_view url, const std::string& why) {
  throw Error(ErrorCode::kConnectionStringInvalid,
              "'" + detail::redact_url_for_error(url) + "': " + why);
}

std::shared_ptr<engine::Engine> open_memory(const detail::ParsedUrl& parsed, std::string_view url) {
  if (!parsed.body.empty()) invalid_url(url, "memory: takes no path (use \"memory:\")");
  std::map<std::string, std::string> query = parsed.query;
  pipeline::PipelineOptions options = pipeline::pipeline_options_from_query(query);
  detail::reject_unknown_options(parsed, query);
  return pipeline::make_pipeline_engine(std::make_unique<engine::MemoryStore>(), options);
}

std::shared_ptr<engine::Engine> open_rocksdb(const detail::ParsedUrl& parsed,
                                             std::string_view url) {
  if (parsed.body.empty()) invalid_url(url, "expected rocksdb:/path/to/dir");
#ifdef KVQ_WITH_ROCKSDB
  // engine::open_rocksdb(path, query) builds the RocksDB store under the commit pipeline.
  return engine::open_rocksdb(parsed.body, parsed.query);
#else
  invalid_url(url, "this kvq was built without RocksDB (KVQ_WITH_ROCKSDB)");
#endif
}

std::shared_ptr<engine::Engine> open_etcd(const detail::ParsedUrl& parsed, std::string_view url) {
  if (parsed.body.rfind("//", 0) != 0 || parsed.body.size() == 2) {
    invalid_url(url, "expected " + parsed.scheme + "://host:port[,host:port]");
  }
#ifdef KVQ_WITH_ETCD
  // engine::open_etcd(tls, endpoints, query), endpoints being "[user:pw@]host:port[,host:port]".
  return engine::open_etcd(parsed.scheme == "etcds", parsed.body.substr(2), parsed.query);
#else
  invalid_url(url, "this kvq was built without etcd (KVQ_WITH_ETCD)");
#endif
}

std::shared_ptr<engine::Engine> open_engine(const detail::ParsedUrl& parsed, std::string_view url) {
  if (parsed.scheme == "memory") return open_memory(parsed, url);
  if (parsed.scheme == "rocksdb") return open_rocksdb(parsed, url);
  if (parsed.scheme == "etcd" || parsed.scheme == "etcds") return open_etcd(parsed, url);
  invalid_url(url, "unknown scheme '" + parsed.scheme +
                       "' (expected memory:, rocksdb:/path or etcd[s]://host:port[,host:port])");
}

}  // namespace

std::shared_ptr<Database> open(std::string_view url) {
  detail::ParsedUrl parsed = detail::parse_url(url);
  // Fault-injection options apply to every engine; they are validated before anything is opened.
  std::optional<engine::FaultInjectionOptions> faults = engine::take_fault_options(parsed.query);
  std::shared_ptr<engine::Engine> engine = open_engine(parsed, url);
  if (faults) engine = std::make_shared<engine::FaultInjectionEngine>(std::move(engine), *faults);
  // Database::url() never holds a password (callers print it).
  return std::make_shared<Database>(std::move(engine), detail::redact_url(url));
}

}  // namespace kvq
