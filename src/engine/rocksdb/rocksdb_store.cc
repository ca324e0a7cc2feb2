#include "engine/rocksdb/rocksdb_store.h"

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/snapshot.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <system_error>
#include <utility>

#include "engine/rocksdb/database_directory.h"
#include "engine/rocksdb/open_snapshots.h"
#include "engine/rocksdb/skip_hints.h"
#include "kvq/error.h"

namespace kvq::engine::rocksdb_engine {
namespace {

constexpr std::string_view kMetaColumnFamily = "kvq_meta";
constexpr std::string_view kFormatKey = "format";
constexpr std::string_view kFormatValue = "kvq-rocksdb-1";
constexpr std::string_view kVersionKey = "version";

rocksdb::Slice to_slice(std::string_view s) { return rocksdb::Slice(s.data(), s.size()); }

std::string encode_version(Version v) {
  std::string out(8, '\0');
  auto u = static_cast<std::uint64_t>(v);
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<char>(u & 0xff);
    u >>= 8;
  }
  return out;
}

// Decodes the "version" value; throws corruption if it is not 8 bytes or negative.
Version decode_version(std::string_view bytes, const std::string& path) {
  if (bytes.size() != 8) {
    throw Error(ErrorCode::kCorruption, "rocksdb: " + path + ": stored version has " +
                                            std::to_string(bytes.size()) + " bytes, expected 8");
  }
  std::uint64_t u = 0;
  for (char c : bytes) u = (u << 8) | static_cast<unsigned char>(c);
  auto v = static_cast<Version>(u);
  if (v < 0) {
    throw Error(ErrorCode::kCorruption, "rocksdb: " + path + ": stored version is negative");
  }
  return v;
}

// Maps a non-ok RocksDB status to a kvq::Error. `what` names the operation and path.
[[noreturn]] void throw_status(const rocksdb::Status& s, const std::string& what) {
  const std::string msg = "rocksdb: " + what + ": " + s.ToString();
  if (s.IsCorruption()) throw Error(ErrorCode::kCorruption, msg);
  if (s.IsNoSpace()) throw Error(ErrorCode::kDatabaseFull, msg);
  throw Error(ErrorCode::kIoError, msg);
}

// True if `s`, returned by DB::Open, says another holder has the LOCK file. RocksDB reports it as
// an IOError: "While lock file: <path>/LOCK: Resource temporarily unavailable" for another process,
// "lock hold by current process" for a second open in this process.
// (RocksDB's own wording only: a path holding "LOCK" is not a lock error.)
bool is_lock_error(const rocksdb::Status& s) {
  if (!s.IsIOError() && !s.IsBusy()) return false;
  const std::string text = s.ToString();
  return text.find("While lock file: ") != std::string::npos ||
         text.find("lock hold by current process") != std::string::npos;
}

// RocksDB's info log, discarded. Its default, a LOG file in the database directory, aborted the
// process when the disk filled (Debian's RocksDB keeps its assertions: a write to the LOG file
// after a failed one fails one), where kvq promises database_full.
class DiscardedInfoLog final : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char* /*format*/, va_list /*args*/) override {}
};

}  // namespace

// Owns the RocksDB instance and its column family handles. The store and every live snapshot hold
// a shared_ptr to it, so the database is closed only after the last snapshot is released.
class DbHandle {
 public:
  DbHandle(rocksdb::DB* db, std::vector<rocksdb::ColumnFamilyHandle*> handles, std::string path)
      : db_(db), handles_(std::move(handles)), path_(std::move(path)) {}
  ~DbHandle() {
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
    db_->Close();  // Errors on close cannot be reported from a destructor; RocksDB logs them.
    delete db_;
  }
  DbHandle(const DbHandle&) = delete;
  DbHandle& operator=(const DbHandle&) = delete;

  rocksdb::DB* db() const { return db_; }
  rocksdb::ColumnFamilyHandle* data() const { return handles_[0]; }
  rocksdb::ColumnFamilyHandle* meta() const { return handles_[1]; }
  const std::string& path() const { return path_; }

 private:
  rocksdb::DB* db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;  // [0] = default (data), [1] = kvq_meta
  std::string path_;
};

namespace {

// Reads the "version" key through `snapshot` (nullptr = latest). Absent = 0 (new database).
Version read_version(const DbHandle& db, const rocksdb::Snapshot* snapshot) {
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  std::string value;
  rocksdb::Status s = db.db()->Get(ro, db.meta(), to_slice(kVersionKey), &value);
  if (s.IsNotFound()) return 0;
  if (!s.ok()) throw_status(s, "reading the version of " + db.path());
  return decode_version(value, db.path());
}

// A RocksDB snapshot with the version it shows. The store may release it early, once its version
// fell below the MVCC floor and no read is using it (OpenSnapshots); reads then throw
// transaction_too_old.
class RocksDbSnapshot final : public pipeline::StoreSnapshot, public OpenSnapshots::Member {
 public:
  RocksDbSnapshot(std::shared_ptr<DbHandle> db, std::shared_ptr<SkipHints> hints,
                  std::shared_ptr<OpenSnapshots> open, const rocksdb::Snapshot* snapshot,
                  Version version)
      : db_(std::move(db)),
        hints_(std::move(hints)),
        open_(std::move(open)),
        snapshot_(snapshot),
        sequence_(snapshot->GetSequenceNumber()),
        version_(version) {
    open_->add(version_, *this);
  }
  ~RocksDbSnapshot() override {
    open_->remove(*this);  // from now on, nobody else releases it
    if (snapshot_ != nullptr) db_->db()->ReleaseSnapshot(snapshot_);
  }
  RocksDbSnapshot(const RocksDbSnapshot&) = delete;
  RocksDbSnapshot& operator=(const RocksDbSnapshot&) = delete;

  Version version() const override { return version_; }

  bool try_release() override {
    std::unique_lock<std::shared_mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) return false;  // a read is under way: a later forget_before
    db_->db()->ReleaseSnapshot(snapshot_);
    snapshot_ = nullptr;
    return true;
  }

  std::optional<std::string> get(std::string_view key) const override {
    std::shared_lock<std::shared_mutex> lock(mu_);
    check_held();
    return get_held(key);
  }

  std::vector<KeyValue> get_range(std::string_view begin, std::string_view end, int limit,
                                  bool reverse) const override {
    std::vector<KeyValue> out;
    if (begin >= end) return out;
    std::shared_lock<std::shared_mutex> lock(mu_);
    check_held();
    const auto want = static_cast<std::size_t>(limit > 0 ? limit : 0);
    const std::vector<KeyStretch> gaps = gaps_to_read(begin, end, reverse);
    for (const KeyStretch& gap : gaps) {
      read_gap(gap, reverse, want, out);
      if (want != 0 && out.size() >= want) break;
    }
    learn_from_read(begin, end, reverse, gaps, out);
    return out;
  }

 private:
  // Stretches known to hold no live key that a range read may skip at most (see skip_hints.h).
  static constexpr std::size_t kMaxSkips = 64;

  // Under mu_: throws transaction_too_old if the store released the RocksDB snapshot.
  void check_held() const {
    if (snapshot_ != nullptr) return;
    throw Error(ErrorCode::kTransactionTooOld,
                "rocksdb: version " + std::to_string(version_) +
                    " left the MVCC window while the transaction was open (its snapshot was "
                    "released)");
  }

  // Under mu_, the snapshot held: the value of `key`.
  std::optional<std::string> get_held(std::string_view key) const {
    rocksdb::ReadOptions ro;
    ro.snapshot = snapshot_;
    std::string value;
    rocksdb::Status s = db_->db()->Get(ro, db_->data(), to_slice(key), &value);
    if (s.IsNotFound()) return std::nullopt;
    if (!s.ok()) throw_status(s, "get in " + db_->path());
    return value;
  }

  // The parts of [begin, end) that the hints do not know to be empty, in the read's order.
  std::vector<KeyStretch> gaps_to_read(std::string_view begin, std::string_view end,
                                       bool reverse) const {
    std::vector<KeyStretch> gaps;
    std::string edge(reverse ? end : begin);  // where the part not yet placed starts
    for (KeyStretch& empty : hints_->empty_stretches(begin, end, sequence_, reverse, kMaxSkips)) {
      if (reverse) {
        if (empty.hi < edge) gaps.push_back({empty.hi, edge});
        edge = std::move(empty.lo);
      } else {
        if (edge < empty.lo) gaps.push_back({edge, empty.lo});
        edge = std::move(empty.hi);
      }
    }
    if (reverse ? begin < edge : edge < end) {
      gaps.push_back(reverse ? KeyStretch{std::string(begin), std::move(edge)}
                             : KeyStretch{std::move(edge), std::string(end)});
    }
    return gaps;
  }

  // Under mu_, the snapshot held: appends the live keys of `gap` to `out` (in the read's order)
  // until it holds `want` (0: all).
  void read_gap(const KeyStretch& gap, bool reverse, std::size_t want,
                std::vector<KeyValue>& out) const {
    if (gap.hi.size() == gap.lo.size() + 1 && gap.hi.back() == '\0' && gap.hi.starts_with(gap.lo)) {
      // One key (between stretches split around a put): a point read.
      if (auto value = get_held(gap.lo)) out.push_back(KeyValue{gap.lo, std::move(*value)});
      return;
    }
    const rocksdb::Slice lower(gap.lo);
    const rocksdb::Slice upper(gap.hi);
    rocksdb::ReadOptions ro;
    ro.snapshot = snapshot_;
    ro.iterate_lower_bound = &lower;
    ro.iterate_upper_bound = &upper;
    std::unique_ptr<rocksdb::Iterator> it(db_->db()->NewIterator(ro, db_->data()));
    for (reverse ? it->SeekToLast() : it->SeekToFirst(); it->Valid();
         reverse ? it->Prev() : it->Next()) {
      out.push_back(KeyValue{it->key().ToString(), it->value().ToString()});
      if (want != 0 && out.size() >= want) break;
    }
    if (!it->status().ok()) throw_status(it->status(), "range read in " + db_->path());
  }

  // Teaches the hints what a read of [begin, end) that read `gaps` and found `out` saw empty:
  // everything before its first live key (all of it if none), if it read some of that itself.
  void learn_from_read(std::string_view begin, std::string_view end, bool reverse,
                       const std::vector<KeyStretch>& gaps,
                       const std::vector<KeyValue>& out) const {
    if (gaps.empty()) return;  // all of it was known empty already
    if (reverse) {
      const std::string empty_from = out.empty() ? std::string(begin) : out.front().key + '\0';
      if (empty_from < gaps.front().hi) hints_->learn(empty_from, end, sequence_);
    } else {
      const std::string_view empty_to = out.empty() ? end : std::string_view(out.front().key);
      if (gaps.front().lo < empty_to) hints_->learn(begin, empty_to, sequence_);
    }
  }

  std::shared_ptr<DbHandle> db_;
  std::shared_ptr<SkipHints> hints_;
  std::shared_ptr<OpenSnapshots> open_;
  // Reads hold it shared, release_early exclusive; null once released.
  mutable std::shared_mutex mu_;
  const rocksdb::Snapshot* snapshot_;
  const std::uint64_t sequence_;
  Version version_;
};

// RocksDB creates only the last component of the path; create the parents too.
void create_parent_directories(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) {
    throw Error(ErrorCode::kIoError,
                "rocksdb: cannot create directory " + path + ": " + ec.message());
  }
}

rocksdb::Options database_options(const RocksDbStoreOptions& options) {
  rocksdb::Options db_options;
  db_options.create_if_missing = options.create_if_missing;
  db_options.create_missing_column_families = false;
  db_options.info_log = std::make_shared<DiscardedInfoLog>();
  db_options.max_manifest_file_size = 16 << 20;
  db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  // The data and kvq_meta families flush together. Every batch writes the version to kvq_meta,
  // whose memtable hardly fills: flushed alone, it kept every log file the data's flushes had
  // made obsolete (up to about 1 GiB), all replayed by the next open after a crash.
  db_options.atomic_flush = true;
  return db_options;
}

std::shared_ptr<DbHandle> open_column_families(const rocksdb::Options& db_options,
                                               const std::string& path) {
  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions(db_options)},
      {std::string(kMetaColumnFamily), rocksdb::ColumnFamilyOptions(db_options)},
  };
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, path, families, &handles, &raw);
  if (!s.ok()) {
    if (is_lock_error(s)) {
      throw Error(ErrorCode::kDatabaseInUse,
                  "rocksdb: the database at " + path +
                      " is in use by another process or open instance (its LOCK file is held): " +
                      s.ToString());
    }
    throw_status(s, "opening " + path);
  }
  return std::make_shared<DbHandle>(raw, std::move(handles), path);
}

// The format marker: written for a new database, checked for an existing one.
void check_or_write_format(DbHandle& db, const std::string& path) {
  std::string format;
  rocksdb::Status s =
      db.db()->Get(rocksdb::ReadOptions(), db.meta(), to_slice(kFormatKey), &format);
  if (s.IsNotFound()) {
    rocksdb::WriteOptions wo;
    wo.sync = true;
    s = db.db()->Put(wo, db.meta(), to_slice(kFormatKey), to_slice(kFormatValue));
    if (!s.ok()) throw_status(s, "initialising " + path);
  } else if (!s.ok()) {
    throw_status(s, "reading the format of " + path);
  } else if (format != kFormatValue) {
    throw Error(ErrorCode::kCorruption, "rocksdb: " + path + " has format '" + format +
                                            "', this kvq reads '" + std::string(kFormatValue) +
                                            "'");
  }
}

}  // namespace

std::unique_ptr<RocksDbStore> RocksDbStore::open(const std::string& path,
                                                 const RocksDbStoreOptions& options) {
  if (path.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "rocksdb: empty database path");
  }
  if (options.create_if_missing) create_parent_directories(path);
  rocksdb::Options db_options = database_options(options);
  db_options.create_missing_column_families =
      inspect_directory(db_options, path, kMetaColumnFamily) != DirectoryState::kKvqDatabase;
  std::shared_ptr<DbHandle> db = open_column_families(db_options, path);
  check_or_write_format(*db, path);
  const Version recovered = read_version(*db, nullptr);
  return std::unique_ptr<RocksDbStore>(new RocksDbStore(path, options, std::move(db), recovered));
}

RocksDbStore::RocksDbStore(std::string path, RocksDbStoreOptions options,
                           std::shared_ptr<DbHandle> db, Version recovered)
    : path_(std::move(path)),
      options_(options),
      db_(std::move(db)),
      latest_version_(recovered),
      cached_sequence_(db_->db()->GetLatestSequenceNumber()),
      cached_version_(recovered),
      hints_(std::make_shared<SkipHints>(cached_sequence_)),
      open_snapshots_(std::make_shared<OpenSnapshots>()) {}

RocksDbStore::~RocksDbStore() = default;

Version RocksDbStore::latest_version() const {
  return latest_version_.load(std::memory_order_acquire);
}

std::shared_ptr<const pipeline::StoreSnapshot> RocksDbStore::snapshot() const {
  const rocksdb::Snapshot* snap = db_->db()->GetSnapshot();
  if (snap == nullptr) {
    throw Error(ErrorCode::kInternalError, "rocksdb: GetSnapshot failed on " + path_);
  }
  Version version = -1;
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (snap->GetSequenceNumber() == cached_sequence_) version = cached_version_;
  }
  if (version < 0) {
    try {
      version = read_version(*db_, snap);
    } catch (...) {
      db_->db()->ReleaseSnapshot(snap);
      throw;
    }
  }
  return std::make_shared<RocksDbSnapshot>(db_, hints_, open_snapshots_, snap, version);
}

void RocksDbStore::apply(Version version, const std::vector<pipeline::StoreWrite>& writes) {
  const Version latest = latest_version();
  if (version <= latest) {
    throw Error(ErrorCode::kInvalidArgument, "rocksdb: apply at version " +
                                                 std::to_string(version) + " <= latest " +
                                                 std::to_string(latest));
  }
  rocksdb::WriteBatch batch;
  rocksdb::Status s;
  std::set<std::string_view> batch_puts;  // keys set earlier in this batch (for clear ranges)
  for (const pipeline::StoreWrite& w : writes) {
    switch (w.kind) {
      case pipeline::StoreWrite::Kind::kSet:
        s = batch.Put(db_->data(), to_slice(w.key), to_slice(w.value));
        batch_puts.insert(w.key);
        break;
      case pipeline::StoreWrite::Kind::kClear:
        s = batch.Delete(db_->data(), to_slice(w.key));
        break;
      case pipeline::StoreWrite::Kind::kClearRange:
        if (w.key < w.value) s = add_clear_range(batch, w.key, w.value, batch_puts);
        break;
    }
    if (!s.ok()) throw_status(s, "building a batch for " + path_);
  }
  const std::string encoded = encode_version(version);
  s = batch.Put(db_->meta(), to_slice(kVersionKey), to_slice(encoded));
  if (!s.ok()) throw_status(s, "building a batch for " + path_);

  std::vector<std::string_view> put_keys;
  std::vector<KeyStretch> cleared;
  for (const pipeline::StoreWrite& w : writes) {
    if (w.kind == pipeline::StoreWrite::Kind::kSet) put_keys.push_back(w.key);
    if (w.kind == pipeline::StoreWrite::Kind::kClear) cleared.push_back({w.key, w.key + '\0'});
    const bool clears_range = w.kind == pipeline::StoreWrite::Kind::kClearRange && w.key < w.value;
    if (clears_range) cleared.push_back({w.key, w.value});
  }
  hints_->begin_write(put_keys, std::move(cleared));
  rocksdb::WriteOptions wo;
  wo.sync = options_.sync;
  s = db_->db()->Write(wo, &batch);
  const std::uint64_t sequence = db_->db()->GetLatestSequenceNumber();
  hints_->end_write(sequence);
  if (!s.ok()) throw_status(s, "writing to " + path_);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    cached_sequence_ = sequence;
    cached_version_ = version;
  }
  latest_version_.store(version, std::memory_order_release);
}

rocksdb::Status RocksDbStore::add_clear_range(rocksdb::WriteBatch& batch, std::string_view begin,
                                              std::string_view end,
                                              const std::set<std::string_view>& batch_puts) {
  // A range clear becomes point deletes of the keys it actually removes, when they are few: RocksDB
  // 7.8 re-fragments every range tombstone of the memtable for each new iterator, so thousands of
  // small DeleteRange (a queue layer sweeping old markers) would make every read slow. apply() is
  // the only writer, so the latest state plus this batch's earlier sets is exactly what the clear
  // sees. A large or tombstone-heavy range stays one DeleteRange.
  constexpr std::size_t kMaxPointDeletes = 256;
  std::vector<std::string> live;
  {
    const rocksdb::Slice lower = to_slice(begin);
    const rocksdb::Slice upper = to_slice(end);
    rocksdb::ReadOptions ro;
    ro.iterate_lower_bound = &lower;
    ro.iterate_upper_bound = &upper;
    ro.max_skippable_internal_keys = 4 * kMaxPointDeletes;
    std::unique_ptr<rocksdb::Iterator> it(db_->db()->NewIterator(ro, db_->data()));
    for (it->SeekToFirst(); it->Valid() && live.size() <= kMaxPointDeletes; it->Next()) {
      live.push_back(it->key().ToString());
    }
    if (!it->status().ok() && !it->status().IsIncomplete()) return it->status();
    if (it->status().IsIncomplete() || live.size() > kMaxPointDeletes) {
      return batch.DeleteRange(db_->data(), lower, upper);
    }
  }
  rocksdb::Status s;
  for (const std::string& k : live) {
    s = batch.Delete(db_->data(), k);
    if (!s.ok()) return s;
  }
  for (auto it = batch_puts.lower_bound(begin); it != batch_puts.end() && *it < end; ++it) {
    s = batch.Delete(db_->data(), to_slice(*it));
    if (!s.ok()) return s;
  }
  return s;
}

void RocksDbStore::forget_before(Version version) { open_snapshots_->release_below(version); }

std::uint64_t RocksDbStore::held_snapshots() const {
  std::uint64_t n = 0;
  db_->db()->GetIntProperty(rocksdb::DB::Properties::kNumSnapshots, &n);
  return n;
}

}  // namespace kvq::engine::rocksdb_engine
