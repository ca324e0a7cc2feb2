// Internal: "known empty" stretches of keys that let range reads on RocksDB jump over deleted keys.
//
// Why: a queue pops from the ends of its key range. RocksDB keeps a tombstone for every popped key
// until compaction drops it, and an iterator seeking to an end steps over every one of them, so
// without help each pop costs O(items popped so far): a long-lived queue slows down
// quadratically. (FoundationDB's storage servers do not have this problem: their MVCC window is
// short and they drop deleted keys after it.)
//
// What: a set of disjoint stretches [lo, hi) of keys, each known to hold no live key at every
// RocksDB sequence from its own `sequence` on. A range read at a snapshot takes the stretches
// inside its range that hold at that snapshot, reads only the gaps between them, and then
// teaches what it found empty: a forward read of [begin, end) whose first live key is k, that
// [begin, k) is empty; a reverse read whose first live key is k, that [k + '\0', end) is. Any
// read may use any stretch (not only those learnt from the same range edge), and a put inside a
// stretch splits it around the key instead of dropping a side, so a priority queue whose pushes
// land among the tombstones its pops left keeps skipping them.
//
// Correctness protocol (the only writer is RocksDbStore::apply, one at a time):
//   before the write:  begin_write(keys it puts,  splits every stretch holding one of the keys
//                        ranges it clears)        around it, and logs the keys and ranges as
//                                                 pending;
//   after the write:   end_write(new sequence)    gives the logged write its sequence.
// A stretch learnt from a snapshot at sequence S is split around every key that a write logged
// with a sequence > S (or still pending) put into it, and is only recorded if the log reaches
// back to S (it keeps the last kLogWrites writes). So every write after S either is checked at
// learning time or begins later and splits the stretch. Stretches that touch or overlap merge,
// taking the later sequence (both are empty from then on). Readers use a stretch only at a
// sequence >= its own, or at an older sequence S without every key that a write logged after S
// cleared (a key live at S and absent when the stretch was learnt was cleared in between).
// Stretches only ever make a read skip keys that are absent at its snapshot, so results are
// unchanged.
//
// Thread-safe. Bounded: at most kMaxStretches stretches (all dropped when full), the last
// kLogWrites writes, holding about kMaxLogBytes bytes of keys at most (the newest write is kept
// whatever its size). A write putting and clearing more than kMaxLoggedKeys keys and ranges in all
// is logged without them: it blocks learning from, and using stretches at, snapshots older than it.
#ifndef KVQ_SRC_ENGINE_ROCKSDB_SKIP_HINTS_H_
#define KVQ_SRC_ENGINE_ROCKSDB_SKIP_HINTS_H_

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvq::engine::rocksdb_engine {

// Keys [lo, hi).
struct KeyStretch {
  std::string lo;
  std::string hi;
  bool operator==(const KeyStretch&) const = default;
};

class SkipHints {
 public:
  static constexpr std::size_t kMaxStretches = 1024;
  static constexpr std::size_t kLogWrites = 4096;
  static constexpr std::size_t kMaxLogBytes = 16 << 20;  // keys and range edges, all writes
  static constexpr std::size_t kMaxLoggedKeys = 4096;    // keys and ranges of one write
  // A reader older than a stretch looks through the writes since its snapshot, up to this many.
  static constexpr std::size_t kMaxStaleWrites = 256;

  // `sequence`: the database's latest sequence number when the store opened.
  explicit SkipHints(std::uint64_t sequence) : log_floor_(sequence) {}

  // Up to `max` known-empty stretches inside [begin, end) that hold at `sequence`, cut to
  // [begin, end), disjoint and in the order a read in that direction meets them (from begin
  // up, or from end down if `reverse`); at most 4 * max stretches are looked at. A read may skip
  // every key inside them. A stretch learnt after `sequence` counts without the keys that the
  // writes since `sequence` cleared (it was empty at `sequence` everywhere else), or not at all
  // if the log cannot say: it does not reach back to `sequence`, more than kMaxStaleWrites writes
  // came since, or one of them was logged without its keys.
  std::vector<KeyStretch> empty_stretches(std::string_view begin, std::string_view end,
                                          std::uint64_t sequence, bool reverse,
                                          std::size_t max) const;

  // Records that [lo, hi) has no live key at `sequence`, split around the keys that later or
  // pending writes put into it. Ignored if the log cannot say which: it does not reach back to
  // `sequence`, or a write since was logged without its keys.
  void learn(std::string_view lo, std::string_view hi, std::uint64_t sequence);

  // Called by the writer before it writes: splits the stretches holding any of `put_keys`, and
  // logs them and the ranges the write clears (`cleared`; a cleared key k as [k, k + '\0')).
  void begin_write(const std::vector<std::string_view>& put_keys,
                   std::vector<KeyStretch> cleared = {});
  // Called by the writer after its write (successful or not), with the latest sequence.
  void end_write(std::uint64_t sequence);

  // Number of stretches held, for tests.
  std::size_t size() const;

 private:
  struct Stretch {
    std::string hi;
    std::uint64_t sequence;
  };
  struct LoggedWrite {
    std::uint64_t sequence;         // kPending until end_write
    bool all_keys;                  // false: too many keys were put or cleared to log them
    std::vector<std::string> keys;  // put, sorted
    std::vector<KeyStretch> cleared;
    std::size_t bytes;  // of keys and cleared
  };
  static constexpr std::uint64_t kPending = ~std::uint64_t{0};

  // Calls visit(write) for each write logged after `sequence` (pending ones too), newest first.
  // False if the log cannot say what they all were: it does not reach back to `sequence`, one of
  // them was logged without its keys, or more than `max_writes` came since (mu_ held).
  template <typename Visit>
  bool visit_writes_since(std::uint64_t sequence, std::size_t max_writes, Visit visit) const;
  // The keys that writes logged after `sequence` (or pending) put into [lo, hi), sorted and
  // unique; false if the log does not reach back to `sequence` or misses some keys (mu_ held).
  bool keys_put_since(std::string_view lo, std::string_view hi, std::uint64_t sequence,
                      std::vector<std::string>& keys) const;
  // What the writes logged after `sequence` cleared inside [begin, end): sorted, disjoint;
  // nullopt if the log cannot say (see empty_stretches) (mu_ held).
  std::optional<std::vector<KeyStretch>> cleared_since(std::string_view begin, std::string_view end,
                                                       std::uint64_t sequence) const;
  // [lo, hi) without `cleared` (sorted, disjoint), in pieces, ascending.
  static std::vector<KeyStretch> without(std::string_view lo, std::string_view hi,
                                         const std::vector<KeyStretch>& cleared);
  // Adds [lo, hi) empty from `sequence`, merged with the stretches it touches (mu_ held).
  void insert_merged(std::string lo, std::string hi, std::uint64_t sequence);
  // Splits the stretch holding `key`, if any, around it (mu_ held).
  void split_at(std::string_view key);

  mutable std::mutex mu_;
  std::deque<LoggedWrite> log_;
  std::uint64_t log_floor_;    // writes with a sequence <= this may be missing from log_
  std::size_t log_bytes_ = 0;  // bytes held by log_
  std::map<std::string, Stretch, std::less<>> stretches_;  // lo -> (hi, sequence); disjoint
};

}  // namespace kvq::engine::rocksdb_engine

#endif  // KVQ_SRC_ENGINE_ROCKSDB_SKIP_HINTS_H_
