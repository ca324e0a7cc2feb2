#include "support/engines.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <stdexcept>

#include "support/etcd_cluster.h"

namespace kvq::testing {

namespace {
// Removes the temporary directories at exit.
class TempDirRegistry {
 public:
  ~TempDirRegistry() {
    for (const std::string& d : dirs_) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  }
  void add(std::string dir) {
    std::lock_guard<std::mutex> lock(mu_);
    dirs_.push_back(std::move(dir));
  }

 private:
  std::mutex mu_;
  std::vector<std::string> dirs_;
};

TempDirRegistry& registry() {
  static TempDirRegistry r;
  return r;
}
}  // namespace

std::string pipeline_query(const EngineOptions& options) {
  if (options.mvcc_window.count() <= 0) return "";
  return "?mvcc_window_ms=" + std::to_string(options.mvcc_window.count());
}

std::string fresh_temp_dir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
  registry().add(tmpl);
  return tmpl;
}

std::vector<EngineFactory> conformance_engines() {
  std::vector<EngineFactory> out;
  out.push_back({"memory", [](const EngineOptions& options) {
                   return kvq::open("memory:" + pipeline_query(options));
                 }});
#ifdef KVQ_WITH_ROCKSDB
  // A fresh directory per database, removed as soon as the database is released (and, as a
  // fallback, at exit). The WAL is not fsynced (sync=false) unless KVQ_ROCKSDB_TEST_SYNC=1: these
  // suites test semantics, and with an fsync per commit the layers' contended-pop tests take
  // minutes; every write still goes through the WAL and the same RocksDB paths. Durability with
  // sync on is tested by rocksdb_engine_test and rocksdb_crash_test.
  out.push_back({"rocksdb", [](const EngineOptions& options) {
                   struct Holder {
                     std::shared_ptr<kvq::Database> db;
                     std::string dir;
                     ~Holder() {
                       db.reset();
                       std::error_code ec;
                       std::filesystem::remove_all(dir, ec);
                     }
                   };
                   const char* sync_env = std::getenv("KVQ_ROCKSDB_TEST_SYNC");
                   const bool sync = sync_env != nullptr && std::string(sync_env) == "1";
                   std::string query = pipeline_query(options);
                   query += (query.empty() ? "?" : "&");
                   query += sync ? "sync=true" : "sync=false";
                   auto holder = std::make_shared<Holder>();
                   holder->dir = fresh_temp_dir("kvq-rocksdb");
                   holder->db = kvq::open("rocksdb:" + holder->dir + query);
                   kvq::Database* raw = holder->db.get();
                   return std::shared_ptr<kvq::Database>(std::move(holder), raw);
                 }});
#endif
#ifdef KVQ_WITH_ETCD
  // etcd: one real 1-member etcd per test process (started on first use), a fresh key prefix
  // per database. If etcd is missing or cannot start, open() throws connection_failed.
  out.push_back({"etcd", [](const EngineOptions& options) -> std::shared_ptr<kvq::Database> {
                   std::string why;
                   std::string query;
                   if (options.mvcc_window.count() > 0) {
                     query = "mvcc_window_ms=" + std::to_string(options.mvcc_window.count());
                   }
                   std::string url = fresh_shared_etcd_url(query, &why);
                   if (url.empty()) {
                     throw Error(ErrorCode::kConnectionFailed, "no test etcd: " + why);
                   }
                   return kvq::open(url);
                 }});
#endif
  return out;
}

}  // namespace kvq::testing
