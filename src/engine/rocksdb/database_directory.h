// Internal (RocksDB engine): what a database directory holds before RocksDB opens it, so that kvq
// creates a database only where nothing else lives, and takes back the directory a creation that
// was interrupted left.
//
// Example:
//   if (inspect_directory(db_options, path, "kvq_meta") == DirectoryState::kKvqDatabase) ...
#ifndef KVQ_SRC_ENGINE_ROCKSDB_DATABASE_DIRECTORY_H_
#define KVQ_SRC_ENGINE_ROCKSDB_DATABASE_DIRECTORY_H_

#include <rocksdb/options.h>

#include <string>
#include <string_view>

namespace kvq::engine::rocksdb_engine {

enum class DirectoryState {
  // No database yet: the path does not exist, is empty, or holds only files RocksDB writes
  // before a database's CURRENT file (its creation was interrupted: a kill, a full disk).
  kNew,
  // A RocksDB database with `meta_family`: kvq's; or one whose column families cannot be listed
  // (a damaged manifest), which its open then reports.
  kKvqDatabase,
  // A RocksDB database with only an empty default column family: a kvq creation interrupted
  // between RocksDB's first commit of the database and the creation of `meta_family`.
  kInterruptedCreation,
};

// What `path` holds. Throws corruption for a RocksDB database kvq did not create (another column
// family, or data in the default one without `meta_family`), invalid_argument for a directory that
// holds files other than RocksDB's (kvq does not create a database among them: RocksDB deletes
// files it takes for its own leftovers), io_error if the directory cannot be listed.
DirectoryState inspect_directory(const rocksdb::Options& db_options, const std::string& path,
                                 std::string_view meta_family);

}  // namespace kvq::engine::rocksdb_engine

#endif  // KVQ_SRC_ENGINE_ROCKSDB_DATABASE_DIRECTORY_H_
