// kvq::open(url): dispatch on the URL scheme to an engine.
#include <map>
#include <memory>
#include <string>

#include "common/url.h"
#include "engine/memory/memory_store.h"
#include "engine/pipeline/commit_pipeline.h"
#include "kvq/database.h"

// Optional engines declare their factories in these headers:
//   std::shared_ptr<engine::Engine> engine::open_rocksdb(const std::string& path,
//                                                        std::map<std::string, std::string> query);
//   std::shared_ptr<engine::Engine> engine::open_etcd(const std::string& endpoints,
//                                                     std::map<std::string, std::string> query);
// They are compiled in when CMake's KVQ_WITH_ROCKSDB / KVQ_WITH_ETCD options are on.
#ifdef KVQ_WITH_ROCKSDB
#include "engine/rocksdb/rocksdb_engine.h"
#endif
#ifdef KVQ_WITH_ETCD
#include "engine/etcd/etcd_engine.h"
#endif

namespace kvq {

std::shared_ptr<Database> open(std::string_view url) {
  detail::ParsedUrl parsed = detail::parse_url(url);

  if (parsed.scheme == "memory") {
    if (!parsed.body.empty()) {
      throw Error(ErrorCode::kConnectionStringInvalid,
                  "'" + std::string(url) + "': memory: takes no path (use \"memory:\")");
    }
    std::map<std::string, std::string> query = parsed.query;
    pipeline::PipelineOptions options = pipeline::pipeline_options_from_query(query);
    detail::reject_unknown_options(parsed, query);
    return std::make_shared<Database>(
        pipeline::make_pipeline_engine(std::make_unique<engine::MemoryStore>(), options),
        std::string(url));
  }

  if (parsed.scheme == "rocksdb") {
    if (parsed.body.empty()) {
      throw Error(ErrorCode::kConnectionStringInvalid,
                  "'" + std::string(url) + "': expected rocksdb:/path/to/dir");
    }
#ifdef KVQ_WITH_ROCKSDB
    // Dispatch point for the RocksDB engine: engine::open_rocksdb(path, query) returns a
    // std::shared_ptr<engine::Engine> (built with pipeline::make_pipeline_engine).
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
