#include "support/layer_engines.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "kvq/error.h"
#include "support/etcd_cluster.h"

namespace kvq::testing {
namespace {

std::shared_ptr<Database> try_open(const std::string& url, std::string* skip_reason) {
  try {
    return kvq::open(url);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kConnectionStringInvalid ||
        e.code() == ErrorCode::kConnectionFailed) {
      *skip_reason = url + " not available: " + e.what();
      return nullptr;
    }
    throw;
  }
}

}  // namespace

long env_int(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return (end && *end == '\0' && n > 0) ? n : fallback;
}

std::vector<LayerEngine> layer_engines() {
  std::vector<LayerEngine> engines;
  engines.push_back({"memory", [](std::string* skip) { return try_open("memory:", skip); }});
#ifdef KVQ_WITH_ROCKSDB
  engines.push_back({"rocksdb", [](std::string* skip) -> std::shared_ptr<Database> {
                       static std::atomic<int> n{0};
                       std::random_device rd;
                       auto dir = std::filesystem::temp_directory_path() /
                                  ("kvq-layer-test-" + std::to_string(getpid()) + "-" +
                                   std::to_string(rd()) + "-" + std::to_string(n++));
                       return try_open("rocksdb:" + dir.string(), skip);
                     }});
#endif
  engines.push_back({"etcd", [](std::string* skip) -> std::shared_ptr<Database> {
                       // $KVQ_TEST_ETCD_URL if set, else a 1-member etcd this test process
                       // starts (tests/support/etcd_cluster.h) with a fresh key prefix.
                       const char* url = std::getenv("KVQ_TEST_ETCD_URL");
                       if (url && *url) return try_open(url, skip);
                       std::string fresh = fresh_shared_etcd_url("", skip);
                       if (fresh.empty()) return nullptr;
                       return try_open(fresh, skip);
                     }});
  return engines;
}

}  // namespace kvq::testing
