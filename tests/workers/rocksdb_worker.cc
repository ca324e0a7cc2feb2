// Helper program for the RocksDB engine tests, run by them with fork+exec.
//
//   rocksdb_worker open-store <path>
//     Opens a RocksDbStore on <path> and exits. Prints "opened version=<v>" and exits 0 on success;
//     on a kvq::Error prints "error <code> <message>" and exits 3.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "engine/rocksdb/rocksdb_store.h"
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

int usage() {
  std::fprintf(stderr, "usage: rocksdb_worker open-store <path>\n");
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) return usage();
    const std::string mode = argv[1];
    if (mode == "open-store" && argc == 3) return open_store(argv[2]);
    return usage();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rocksdb_worker: %s\n", e.what());
    return 70;
  }
}
