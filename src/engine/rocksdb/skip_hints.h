// Internal: "known empty" hints that let limited range reads on RocksDB jump over deleted keys.
//
// Why: a queue pops from the head of its key range. RocksDB keeps a tombstone for every popped key
// until compaction drops it, and an iterator seeking to the head steps over every one of them, so
// without help each pop costs O(items popped so far): a long-lived queue slows down
// quadratically. (FoundationDB's storage servers do not have this problem: their MVCC window is
// short and they drop deleted keys after it.)
//
// What: after a forward scan of [begin, end) at RocksDB sequence S finds its first live key k, we
// know that [begin, k) holds no live key at S. That fact stays true for every later snapshot until
// a write puts a key into [begin, k). The hint "forward[begin] = (k, S)" lets the next scan from
// `begin` at a snapshot with sequence >= S seek directly to k. Reverse scans are symmetric:
// "reverse[end] = (e, S)" says [e, end) is empty.
//
// Correctness protocol (the only writer is RocksDbStore::apply, one at a time):
//   before the write:  begin_write(keys it puts)  shrinks every hint whose empty stretch contains
//                                                 one of the keys to the part that stays empty
//                                                 (erasing it if none), and logs the keys as
//                                                 pending;
//   after the write:   end_write(new sequence)    gives the logged write its sequence.
// A hint learnt from a snapshot at sequence S is shrunk to the part of its stretch that no write
// logged with a sequence > S (or still pending) put a key into, and is only recorded if the log
// reaches back to S (it keeps the last kLogWrites writes). So every write after S either is checked
// at learning time or begins later and shrinks the hint. Readers use a hint only at a sequence >=
// its own. Hints only ever make a scan skip keys that are absent at its snapshot, so results are
// unchanged.
//
// Thread-safe. Bounded: at most kMaxHints per direction (all dropped when full), kLogWrites
// logged writes holding at most kMaxLogKeys keys in all (a write of more than kMaxLoggedKeys keys
// is logged without them and blocks learning from snapshots older than it).
#ifndef KVQ_SRC_ENGINE_ROCKSDB_SKIP_HINTS_H_
#define KVQ_SRC_ENGINE_ROCKSDB_SKIP_HINTS_H_

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace kvq::engine::rocksdb_engine {

class SkipHints {
 public:
  static constexpr std::size_t kMaxHints = 64;
  static constexpr std::size_t kLogWrites = 4096;
  static constexpr std::size_t kMaxLogKeys = 65536;  // keys over all logged writes
  static constexpr std::size_t kMaxLoggedKeys = 4096;

  // `sequence`: the database's latest sequence number when the store opened.
  explicit SkipHints(std::uint64_t sequence) : log_floor_(sequence) {}

  // Where a forward scan of [begin, ...) at `sequence` may start: a key >= begin such that
  // [begin, result) has no live key at `sequence`. Returns begin if nothing is known.
  std::string forward_start(std::string_view begin, std::uint64_t sequence) const;
  // Where a reverse scan of [..., end) at `sequence` may start (exclusive upper bound): a key
  // <= end such that [result, end) has no live key at `sequence`. Returns end if nothing is known.
  std::string reverse_start(std::string_view end, std::uint64_t sequence) const;

  // Records that [begin, first_live) has no live key at `sequence`, shrunk to the part later or
  // pending writes put nothing into (ignored if `sequence` is older than the log).
  void learn_forward(std::string_view begin, std::string_view first_live, std::uint64_t sequence);
  // Records that [last_live_end, end) has no live key at `sequence` (same conditions).
  void learn_reverse(std::string_view last_live_end, std::string_view end, std::uint64_t sequence);

  // Called by the writer before it writes: shrinks hints covering any of `put_keys`.
  void begin_write(const std::vector<std::string_view>& put_keys);
  // Called by the writer after its write (successful or not), with the latest sequence.
  void end_write(std::uint64_t sequence);

  // Number of hints held (both directions), for tests.
  std::size_t size() const;

 private:
  struct Hint {
    std::string edge;
    std::uint64_t sequence;
  };
  struct LoggedWrite {
    std::uint64_t sequence;         // kPending until end_write
    bool all_keys;                  // false: too many keys were put to log them
    std::vector<std::string> keys;  // sorted
  };
  static constexpr std::uint64_t kPending = ~std::uint64_t{0};

  // [lo, hi) was empty at `sequence`; shrinks it (keeping lo if keep_low, else hi) to the part no
  // later or pending write put a key into. False if nothing is left or the log does not reach
  // back to `sequence` (mu_ held).
  bool shrink_to_unwritten(std::string& lo, std::string& hi, bool keep_low,
                           std::uint64_t sequence) const;

  mutable std::mutex mu_;
  std::deque<LoggedWrite> log_;
  std::uint64_t log_floor_;   // writes with a sequence <= this may be missing from log_
  std::size_t log_keys_ = 0;  // keys held by log_
  std::map<std::string, Hint, std::less<>> forward_;  // begin -> (first possibly live key, seq)
  std::map<std::string, Hint, std::less<>> reverse_;  // end -> (start of the empty stretch, seq)
};

}  // namespace kvq::engine::rocksdb_engine

#endif  // KVQ_SRC_ENGINE_ROCKSDB_SKIP_HINTS_H_
