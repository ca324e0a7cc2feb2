// Internal: the machinery Queue and PriorityQueue share. Both keep items at keys of the form
// subspace + (int, ...) and control keys under subspace + ("kvq", ...); a Queue is the one-sided
// case (front only) of a double-ended priority queue whose first key element is the push index.
//
// High-contention pops (docs/queues.md has the long form):
//   ("kvq", "req", versionstamp)  = (random_id, side)   a waiting pop, ordered by registration commit
//   ("kvq", "slot", random_id)    = state byte [+ 10-byte versionstamp of the request]
//        \x00 waiting, \x03 waiting and holding the fulfiller baton, \x01 + value delivered,
//        \x04 delivered with the value in res (values too big to inline), \x02 empty
//   ("kvq", "res", random_id)     = the delivered item's value (while slot is \x04)
//   ("kvq", "lease")              = (holder random_id, expiry unix ms): the one current fulfiller
//   ("kvq", "size")               = 8-byte little-endian item count (atomic_add)
//   ("kvq", "waiting")            = 8-byte little-endian count of waiting requests (atomic_add)
//   ("kvq", "mark", unix_ms, random) = ""   idempotency marker of a push or pop
#ifndef KVQ_SRC_LAYERS_ITEM_STORE_H_
#define KVQ_SRC_LAYERS_ITEM_STORE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kvq/database.h"
#include "kvq/queue.h"
#include "kvq/subspace.h"

namespace kvq::detail {

enum class Side : std::int64_t { kFront = 0, kBack = 1 };

struct ItemStoreOptions {
  bool high_contention = false;
  HighContentionOptions contention;
  std::chrono::milliseconds pop_timeout{0};
  std::chrono::milliseconds marker_ttl{600'000};
};

// Process-wide counters of the high-contention machinery, for `kvq bench` (monotonic).
struct ContentionStats {
  std::atomic<std::uint64_t> fast_pops{0};        // pops done by the fast path
  std::atomic<std::uint64_t> staged_pops{0};      // pops that registered a request
  std::atomic<std::uint64_t> batches{0};          // committed fulfilment transactions (leased)
  std::atomic<std::uint64_t> batch_conflicts{0};  // fulfilment transactions that failed to commit
  std::atomic<std::uint64_t> served{0};           // requests answered by leased batches
  std::atomic<std::uint64_t> watch_waits{0};      // waits on a slot watch
};
ContentionStats& contention_stats();

// `random_bytes(n)`: n bytes from a per-thread PRNG seeded from std::random_device.
std::string random_bytes(std::size_t n);

class ItemStore {
 public:
  // `prioritized` selects the PriorityQueue layout (priority, count, random); otherwise the Queue
  // layout (index, random). Throws invalid_option_value for bad options.
  ItemStore(std::shared_ptr<Database> db, Subspace subspace, ItemStoreOptions options,
            bool prioritized);

  // Push with its own retry loop and idempotency marker. `priority` is ignored for queues.
  void push(std::string_view value, std::int64_t priority);
  // Push inside `tr` with the given random part.
  void push(Transaction& tr, std::string_view value, std::int64_t priority,
            const std::string& random);

  // Pop with its own retry loop (high-contention staging if enabled); timeout 0 = none.
  std::optional<std::string> pop(Side side, std::chrono::milliseconds timeout);
  // Pop inside `tr`; in high-contention mode serves waiting requests first.
  std::optional<std::string> pop(Transaction& tr, Side side);
  std::optional<std::string> peek(Transaction& tr, Side side);
  std::int64_t size(Transaction& tr);
  void clear(Transaction& tr);

  const Subspace& subspace() const { return subspace_; }
  Database& db() { return *db_; }
  const ItemStoreOptions& options() const { return options_; }

 private:
  struct Request;
  struct BatchResult;
  std::string item_key(Transaction& tr, std::int64_t priority, const std::string& random);
  std::optional<KeyValue> end_item(Transaction& tr, Side side, bool snapshot);
  std::optional<std::string> pop_plain(Transaction& tr, Side side);
  std::optional<std::string> pop_staged(Side side, std::chrono::milliseconds timeout);
  std::optional<std::string> pop_fast(Side side, bool* staged);
  std::string register_request(Side side);
  BatchResult fulfil_batch(Transaction& tr, const std::string* me, bool hand_off_newest);
  // Serves every waiting request inside `tr` (no lease); clears the lease afterwards.
  void serve_all(Transaction& tr);
  std::optional<std::string> cancel_request(const std::string& me, bool* delivered);
  void pass_baton(Transaction& tr, const std::string& me, std::int64_t now_ms);

  // Runs body(tr) in a retry loop that is safe under commit_unknown_result: the transaction also
  // writes a fresh marker key, and a retry after a maybe-committed attempt first checks it (if
  // present, that attempt committed and its result is returned).
  template <typename F>
  auto run_once(F&& body, const TransactionOptions& topts = {}) -> decltype(body(
      std::declval<Transaction&>()));
  std::string new_marker() const;
  void write_marker(Transaction& tr, const std::string& marker);
  void remember_marker(const std::string& marker);

  std::string slot_key(std::string_view id) const;
  std::string res_key(std::string_view id) const;
  std::string req_key(std::string_view versionstamp10) const;

  std::shared_ptr<Database> db_;
  Subspace subspace_;
  Subspace control_;
  ItemStoreOptions options_;
  bool prioritized_;
  std::string items_begin_, items_end_;
  std::string size_key_, lease_key_, waiting_key_;
  std::string req_begin_, req_end_;
  std::string marker_prefix_;
  std::uint64_t store_id_;
};

}  // namespace kvq::detail

#endif  // KVQ_SRC_LAYERS_ITEM_STORE_H_
