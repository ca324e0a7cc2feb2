#include "engine/rocksdb/database_directory.h"

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <system_error>
#include <vector>

#include "kvq/error.h"

namespace kvq::engine::rocksdb_engine {
namespace {

// Whether RocksDB writes a file of this name in a new database's directory before the CURRENT file
// that makes it a database: its lock, identity and info log, the first manifest, an options file,
// a temporary file. (Its write-ahead logs come after CURRENT; RocksDB refuses to create a database
// beside one.)
bool is_rocksdb_file_before_current(const std::string& name) {
  return name == "LOCK" || name == "IDENTITY" || name == "LOG" || name.starts_with("LOG.old.") ||
         name.starts_with("MANIFEST-") || name.starts_with("OPTIONS-") || name.ends_with(".dbtmp");
}

// Throws invalid_argument if `path` holds a file RocksDB would not have written before CURRENT.
void check_holds_nothing_else(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (!is_rocksdb_file_before_current(name)) {
      throw Error(ErrorCode::kInvalidArgument,
                  "rocksdb: " + path + " holds '" + name +
                      "' and no database: kvq creates a database only in a new or empty directory");
    }
  }
  if (ec) {
    throw Error(ErrorCode::kIoError,
                "rocksdb: cannot list directory " + path + ": " + ec.message());
  }
}

// Whether the default column family of the database at `path` holds no key (opened read-only).
bool default_family_is_empty(const rocksdb::Options& db_options, const std::string& path) {
  rocksdb::DB* raw = nullptr;
  if (!rocksdb::DB::OpenForReadOnly(db_options, path, &raw).ok()) return false;
  const std::unique_ptr<rocksdb::DB> db(raw);
  const std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  it->SeekToFirst();
  return !it->Valid() && it->status().ok();
}

}  // namespace

DirectoryState inspect_directory(const rocksdb::Options& db_options, const std::string& path,
                                 std::string_view meta_family) {
  std::vector<std::string> families;
  if (!rocksdb::DB::ListColumnFamilies(db_options, path, &families).ok()) {
    std::error_code ec;
    // A CURRENT file RocksDB cannot follow (a lost or damaged manifest): a database, whose open
    // reports what is wrong (corruption), not a directory to create one in.
    if (std::filesystem::exists(std::filesystem::path(path) / "CURRENT", ec)) {
      return DirectoryState::kKvqDatabase;
    }
    // No database (or an unreadable directory: DB::Open reports that).
    check_holds_nothing_else(path);
    return DirectoryState::kNew;
  }
  if (std::find(families.begin(), families.end(), meta_family) != families.end()) {
    return DirectoryState::kKvqDatabase;
  }
  if (families == std::vector<std::string>{rocksdb::kDefaultColumnFamilyName} &&
      default_family_is_empty(db_options, path)) {
    return DirectoryState::kInterruptedCreation;
  }
  throw Error(ErrorCode::kCorruption, "rocksdb: " + path +
                                          " is a RocksDB database that kvq did not create (no '" +
                                          std::string(meta_family) + "' column family)");
}

}  // namespace kvq::engine::rocksdb_engine
