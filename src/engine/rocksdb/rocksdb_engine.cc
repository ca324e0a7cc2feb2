#include "engine/rocksdb/rocksdb_engine.h"

#include <utility>

#include "engine/pipeline/commit_pipeline.h"
#include "engine/rocksdb/rocksdb_store.h"
#include "kvq/error.h"

namespace kvq::engine {

std::shared_ptr<Engine> open_rocksdb(const std::string& path,
                                     const std::map<std::string, std::string>& query) {
  if (path.empty()) {
    throw Error(ErrorCode::kConnectionStringInvalid,
                "rocksdb: needs a directory path, e.g. \"rocksdb:/var/lib/kvq\"");
  }
  std::map<std::string, std::string> rest = query;
  rocksdb_engine::RocksDbStoreOptions store_options;
  if (auto it = rest.find("sync"); it != rest.end()) {
    if (it->second == "true" || it->second == "1") {
      store_options.sync = true;
    } else if (it->second == "false" || it->second == "0") {
      store_options.sync = false;
    } else {
      throw Error(ErrorCode::kConnectionStringInvalid,
                  "rocksdb: sync must be true or false, got '" + it->second + "'");
    }
    rest.erase(it);
  }
  pipeline::PipelineOptions pipeline_options = pipeline::pipeline_options_from_query(rest);
  if (!rest.empty()) {
    throw Error(
        ErrorCode::kConnectionStringInvalid,
        "rocksdb: unknown option '" + rest.begin()->first + "' (known: sync, mvcc_window_ms)");
  }
  return pipeline::make_pipeline_engine(rocksdb_engine::RocksDbStore::open(path, store_options),
                                        pipeline_options);
}

}  // namespace kvq::engine
