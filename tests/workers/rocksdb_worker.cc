// Helper program for the RocksDB engine tests, run by them with fork+exec.
//
//   rocksdb_worker open-store <path>
//     Opens a RocksDbStore on <path> and exits. Prints "opened version=<v>" and exits 0 on success;
//     on a kvq::Error prints "error <code> <message>" and exits 3.
//
//   rocksdb_worker open-db <url> [key...]
//     kvq::open(<url>), then prints "opened" and "<key>=<value>" (or "<key> absent") for each key
//     read in one transaction; exits 0. On a kvq::Error prints "error <code> <message>", exits 3.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "engine/rocksdb/rocksdb_store.h"
#include "kvq/database.h"
#include "kvq/error.h"

namespace {

int open_store(const std::string& path) {
  try {
    auto store = kvq::engine::rocksdb_engine::RocksDbStore::open(path);
    std::printf("opened version=%lld\n", static_cast<long long>(store->latest_version()));
    return 0;
  } catch (const kvq::Error& e) {
    std::printf("error %d %s\n", e.value(), e.what());
    return 3;
  }
}

int open_db(const std::string& url, const std::vector<std::string>& keys) {
  try {
    auto db = kvq::open(url);
    std::printf("opened\n");
    db->run([&](kvq::Transaction& tr) {
      for (const std::string& k : keys) {
        auto v = tr.get(k);
        if (v) {
          std::printf("%s=%s\n", k.c_str(), v->c_str());
        } else {
          std::printf("%s absent\n", k.c_str());
        }
      }
    });
    return 0;
  } catch (const kvq::Error& e) {
    std::printf("error %d %s\n", e.value(), e.what());
    return 3;
  }
}

int usage() {
  std::fprintf(stderr, "usage: rocksdb_worker open-store <path> | open-db <url> [key...]\n");
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) return usage();
    const std::string mode = argv[1];
    if (mode == "open-store" && argc == 3) return open_store(argv[2]);
    if (mode == "open-db" && argc >= 3) {
      return open_db(argv[2], std::vector<std::string>(argv + 3, argv + argc));
    }
    return usage();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rocksdb_worker: %s\n", e.what());
    return 70;
  }
}
