// Internal: reads at the ends of the items whose cost follows what they return, not how many items
// are queued. etcd (3.4 here, and every release before 3.7) answers a Range with a limit by
// visiting every key of the range in its index to count them, and a reverse one by sorting them
// (etcd issues #11057 and #16510): "the first item" of a queue holding 100,000 items cost 0.3-0.7 s
// a pop there. So a read at one end looks first in a window next to where the previous read of the
// same end found its items (the hint), and reads the rest of the range only if the window ran
// short:
//   front:  [begin, bound) with bound = hint position + window, then [bound, end);
//   back:   [bound, end)   with bound = hint position - window, then [begin, bound);
// pops widen the window to a position that is a multiple of 128 (x the stride, below), so that
// concurrent pops of one process, which move the hint a little, ask the very reads they
// prefetched.
// Item keys start with (position, ...) in a Queue and (priority, position, ...) in a
// PriorityQueue, so a bound is the packed (position ± window) or (priority, position ± window).
// A Queue's positions are dense; a PriorityQueue's counts come from one counter for all its
// priorities, so a hint also keeps how many positions apart the items of its priority were found
// (the stride), and the window spans that many times more positions.
// The two reads partition the range, and the second is made only if the first returned fewer
// items than asked for: the result and the read-conflict ranges are exactly those of one read of
// [begin, end). The window holds about `window` items (plus, on etcd, the keys
// deleted since the last compaction). Hints live in memory, shared by the copies of an ItemRange;
// a fresh object reads the whole range once. docs/queues.md, "Reads that do not grow with depth".
#ifndef KVQ_SRC_LAYERS_CONTENTION_END_WINDOWS_H_
#define KVQ_SRC_LAYERS_CONTENTION_END_WINDOWS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kvq/database.h"
#include "layers/contention/control.h"
#include "layers/contention/owned_read.h"

namespace kvq::contention {

// New, empty hints for an ItemRange.
std::shared_ptr<EndHints> make_end_hints();

// `n` items as a range read's limit (RangeOptions::limit is an int): n, or the largest int.
int range_limit(std::size_t n);

// The first `limit` (> 0) items from `side` of `items` (front: ascending from items.begin; back:
// descending from items.end), as tr.get_range(items.begin, items.end, {limit, side == kBack,
// snapshot}) returns them and with the same read conflicts; usually a read of a small window.
std::vector<KeyValue> read_end(Transaction& tr, const ItemRange& items, Side side, int limit,
                               bool snapshot);

// As read_end(tr, *items[i], side, limit, snapshot) for each i, with the first read of each and
// `also`'s reads made together (Transaction::get_ranges; the answers to `also` go to *also_got
// if it is given), then the second reads of the windows that ran short together: on etcd two
// round trips (a Txn of reads each) for up to --max-txn-ops ranges, where read_end makes up to
// two each.
std::vector<std::vector<KeyValue>> read_ends(
    Transaction& tr, std::span<const ItemRange* const> items, Side side, int limit, bool snapshot,
    std::span<const RangeRead> also = {}, std::vector<std::vector<KeyValue>>* also_got = nullptr);

// As read_end(tr, items, side, limit, /*snapshot=*/false) when it finds `limit` items (the same
// read-conflict range); when it finds fewer (and at least one), its read-conflict range still
// ends at the last one found, as if the read had stopped at its limit there: pushes committed
// meanwhile beyond it do not conflict. So a caller that gets fewer than `limit` items learns
// nothing of the rest of the range (a batch of pops that takes them answers its other pops later:
// fitting.h ShortBatch). No read conflict if it finds none.
std::vector<KeyValue> read_end_up_to_last(Transaction& tr, const ItemRange& items, Side side,
                                          int limit);

// The read conflict a non-snapshot read_end at `side` of `items` adds when the last item it found
// is the one at `last_key` (nullptr: it found none, and depends on the whole range), for a
// caller that read with a snapshot and depends on what it found after all.
void add_end_read_conflict(Transaction& tr, const ItemRange& items, Side side,
                           const std::string* last_key);

// The first get_range that read_end(tr, items, side, limit, snapshot) would make now (for
// Transaction::prefetch).
OwnedRead first_end_read(const ItemRange& items, Side side, int limit, bool snapshot);

// Where a Queue's pushes go behind: the larger of the positions of its last item and of its last
// held place (ItemRange::held_prefix: an item out on lease), or nullopt if there is neither.
// Snapshot reads, made together (Transaction::get_ranges: one round trip on etcd), in the window
// next to the back hint, then below it if both parts of the window were empty.
std::optional<std::int64_t> last_position(Transaction& tr, const ItemRange& items);

}  // namespace kvq::contention

#endif  // KVQ_SRC_LAYERS_CONTENTION_END_WINDOWS_H_
