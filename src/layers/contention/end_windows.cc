#include "layers/contention/end_windows.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <mutex>
#include <string>

#include "client/transaction_access.h"
#include "common/bytes.h"
#include "kvq/error.h"
#include "kvq/tuple.h"

namespace kvq::contention {

// An item's place: (priority, position); priority is 0 in a Queue.
struct Place {
  std::int64_t priority = 0;
  std::int64_t position = 0;
};

// What reads at one end of the items last found there.
struct EndHint {
  Place last;  // the place of the last item found
  // Positions per item of last's priority there, as measured (a PriorityQueue's counts come from
  // one counter for all its priorities, so each priority's items are spread out); 1 in a Queue.
  std::int64_t stride = 1;
};

struct EndHints {
  std::mutex mu;
  std::optional<EndHint> ends[2];  // by Side
};

namespace {

// Items a window holds at least (and twice the items asked for), at kWindow x stride positions.
constexpr std::int64_t kWindow = 128;
// Bound on a measured stride (positions per item): keeps window bounds far from overflow.
constexpr std::int64_t kMaxStride = std::int64_t{1} << 24;

// The place of item key `key`, or nullopt for a key kvq did not write.
std::optional<Place> place_of(const ItemRange& items, const std::string& key) {
  try {
    const Tuple t = Tuple::unpack(std::string_view(key).substr(items.prefix_size));
    if (!items.prioritized) return Place{0, t.get_int(0)};
    return Place{t.get_int(0), t.get_int(1)};
  } catch (const Error&) {
    return std::nullopt;
  }
}

// The key just before the items at `position` + `delta` (of `priority`), or nullopt if that
// position overflows.
std::optional<std::string> bound_at(const ItemRange& items, Place p, std::int64_t delta) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  if ((delta > 0 && p.position > kMax - delta) || (delta < 0 && p.position < kMin - delta)) {
    return std::nullopt;
  }
  Tuple t;
  if (items.prioritized) t.append(p.priority);
  t.append(p.position + delta);
  return items.begin.substr(0, items.prefix_size) + t.pack();
}

// Whether a read of `limit` items of [begin, end) reads the window next to `bound` first (else
// the whole range at once).
bool windowed(const std::string& begin, const std::string& end,
              const std::optional<std::string>& bound, int limit) {
  // (A limit of 0 means "no limit": the window alone would not do.)
  return bound && limit > 0 && *bound > begin && *bound < end;
}

// The first read of read_two_parts(tr, begin, end, bound, side, limit, snapshot) (its strings
// viewed, not copied).
RangeRead first_part(const std::string& begin, const std::string& end,
                     const std::optional<std::string>& bound, Side side, int limit, bool snapshot) {
  const bool back = side == Side::kBack;
  const RangeOptions options{.limit = limit, .reverse = back, .snapshot = snapshot};
  if (!windowed(begin, end, bound, limit)) return {begin, end, options};
  return back ? RangeRead{*bound, end, options} : RangeRead{begin, *bound, options};
}

// The second read of read_two_parts, if the first found `found` items: the rest of [begin, end)
// beyond the window, for the items still wanted (nullopt if none are, or there is no window).
std::optional<RangeRead> second_part(const std::string& begin, const std::string& end,
                                     const std::optional<std::string>& bound, Side side, int limit,
                                     bool snapshot, std::size_t found) {
  if (!windowed(begin, end, bound, limit)) return std::nullopt;
  const int rest = limit - static_cast<int>(found);
  if (rest <= 0) return std::nullopt;
  if (side == Side::kBack)
    return RangeRead{begin, *bound, {.limit = rest, .reverse = true, .snapshot = snapshot}};
  return RangeRead{*bound, end, {.limit = rest, .snapshot = snapshot}};
}

void append(std::vector<KeyValue>& to, std::vector<KeyValue> more) {
  to.insert(to.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
}

// Up to `limit` items of [begin, end) from `side`: first from the window between `bound` and
// that side's end, then, if it ran short, from the rest (see the file comment).
std::vector<KeyValue> read_two_parts(Transaction& tr, const std::string& begin,
                                     const std::string& end,
                                     const std::optional<std::string>& bound, Side side, int limit,
                                     bool snapshot) {
  const RangeRead first = first_part(begin, end, bound, side, limit, snapshot);
  std::vector<KeyValue> near = tr.get_range(first.begin, first.end, first.options);
  if (auto far = second_part(begin, end, bound, side, limit, snapshot, near.size())) {
    append(near, tr.get_range(far->begin, far->end, far->options));
  }
  return near;
}

// The positions per item that `out`, a read at `side` after the one that found `before`,
// shows in the priority of its last item: the mean gap between its items there, or, for one
// item, its distance from `before` if the end moved inwards; nullopt if it shows none.
std::optional<std::int64_t> stride_seen(const ItemRange& items, Side side,
                                        const std::vector<KeyValue>& out,
                                        const std::optional<EndHint>& before, Place last) {
  std::int64_t items_there = 0;  // of out's items before the last, in last's priority
  std::int64_t first = last.position;
  for (std::size_t i = out.size() - 1; i-- > 0;) {
    const std::optional<Place> p = place_of(items, out[i].key);
    if (!p || p->priority != last.priority) break;
    first = p->position;
    ++items_there;
  }
  if (items_there == 0) {
    // One item: its distance from the last read's if the end moved inwards, as pops move it.
    // The same item again (a peek, a pop that did not commit) says nothing of the gaps, and nor
    // does a move outwards: pushes past the back, an item back from a lease below the front.
    if (!before || before->last.priority != last.priority) return std::nullopt;
    first = before->last.position;
    const bool inwards = side == Side::kFront ? last.position > first : last.position < first;
    if (!inwards) return std::nullopt;
  }
  // (Unsigned: positions written by others may be far apart; a stride is capped anyway.)
  const auto a = static_cast<std::uint64_t>(last.position), b = static_cast<std::uint64_t>(first);
  const std::uint64_t gap =
      (a > b ? a - b : b - a) / static_cast<std::uint64_t>(std::max<std::int64_t>(items_there, 1));
  return static_cast<std::int64_t>(std::min<std::uint64_t>(gap, kMaxStride));
}

// The stride of `hint` after a read there saw `seen` (in the hint's priority), from 1 to
// kMaxStride. A read that found its last item inside the window moves it as a running mean, at
// most doubling it (a read after other clients took many items sees a large gap once). One that
// had to read beyond the window (a read that visits the rest of the range: on etcd, every key of
// it) takes a larger gap it saw as it is, up to 16 times the stride, so that a fresh object over
// spread-out items pays few such reads.
std::int64_t next_stride(const std::optional<EndHint>& hint, std::int64_t seen,
                         bool beyond_window) {
  const std::int64_t stride = hint ? hint->stride : 1;
  const std::int64_t next = beyond_window ? std::clamp(seen, stride, 16 * stride)
                                          : std::min(2 * stride, (3 * stride + seen) / 4);
  return std::clamp<std::int64_t>(next, 1, kMaxStride);
}

// Remembers where the read at `side` of `items` that returned `out`, with its window up to
// `bound` (nullopt: none), found its last item, and, in a PriorityQueue, how far apart the
// items it found are.
void remember_end(const ItemRange& items, Side side, const std::vector<KeyValue>& out,
                  const std::optional<std::string>& bound) {
  if (!items.hints || out.empty()) return;
  const std::optional<Place> last = place_of(items, out.back().key);
  if (!last) return;
  const bool beyond_window =
      bound && (side == Side::kFront ? out.back().key >= *bound : out.back().key < *bound);
  std::lock_guard lock(items.hints->mu);
  std::optional<EndHint>& hint = items.hints->ends[static_cast<int>(side)];
  std::int64_t stride = 1;
  if (items.prioritized) {
    const std::optional<std::int64_t> seen = stride_seen(items, side, out, hint, *last);
    stride = seen ? next_stride(hint, *seen, beyond_window) : hint ? hint->stride : 1;
  }
  hint = EndHint{*last, stride};
}

// x mod `unit`, in [0, unit).
std::int64_t mod(std::int64_t x, std::int64_t unit) { return ((x % unit) + unit) % unit; }

// The bound of the window that a read of `limit` items at `side` of `items` reads first, from
// the hint; nullopt without one. The window spans `window` x stride positions beyond the hint
// (the stride rounded up to a power of two), widened to a position that is a multiple of
// kWindow x stride: reads made while other threads move the hint by a few positions then ask the
// same range (a prefetched read answers only the very same request; on etcd, a pop whose read
// differs from its prefetched one makes a round trip more).
std::optional<std::string> window_bound(const ItemRange& items, Side side, int limit) {
  if (!items.hints) return std::nullopt;
  std::optional<EndHint> hint;
  {
    std::lock_guard lock(items.hints->mu);
    hint = items.hints->ends[static_cast<int>(side)];
  }
  if (!hint) return std::nullopt;
  // (A stride is 1..kMaxStride, so its power of two fits.)
  const auto stride =
      static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(hint->stride)));
  const std::int64_t unit = kWindow * stride;
  const std::int64_t window = std::max<std::int64_t>(kWindow, 2 * std::int64_t{limit}) * stride;
  const std::int64_t from_hint = mod(hint->last.position, unit), span = mod(window, unit);
  if (side == Side::kBack) {
    return bound_at(items, hint->last, -(window + mod(from_hint - span, unit)));
  }
  return bound_at(items, hint->last, window + mod(-(from_hint + span), unit));
}

}  // namespace

int range_limit(std::size_t n) {
  return static_cast<int>(std::min<std::size_t>(n, std::numeric_limits<int>::max()));
}

std::shared_ptr<EndHints> make_end_hints() { return std::make_shared<EndHints>(); }

std::vector<KeyValue> read_end(Transaction& tr, const ItemRange& items, Side side, int limit,
                               bool snapshot) {
  const std::optional<std::string> bound = window_bound(items, side, limit);
  std::vector<KeyValue> out =
      read_two_parts(tr, items.begin, items.end, bound, side, limit, snapshot);
  remember_end(items, side, out, bound);
  return out;
}

std::vector<std::vector<KeyValue>> read_ends(Transaction& tr,
                                             std::span<const ItemRange* const> items, Side side,
                                             int limit, bool snapshot,
                                             std::span<const RangeRead> also,
                                             std::vector<std::vector<KeyValue>>* also_got) {
  // (Made before the reads that view them: a short bound lives inside its string.)
  std::vector<std::optional<std::string>> bounds;
  for (const ItemRange* r : items) bounds.push_back(window_bound(*r, side, limit));
  std::vector<RangeRead> firsts;
  for (std::size_t i = 0; i < items.size(); ++i) {
    firsts.push_back(first_part(items[i]->begin, items[i]->end, bounds[i], side, limit, snapshot));
  }
  firsts.insert(firsts.end(), also.begin(), also.end());
  std::vector<std::vector<KeyValue>> got = tr.get_ranges(firsts);
  if (also_got)
    also_got->assign(std::make_move_iterator(got.begin() + items.size()),
                     std::make_move_iterator(got.end()));
  got.resize(items.size());
  // The second parts of the windows that ran short, together.
  std::vector<RangeRead> seconds;
  std::vector<std::size_t> second_of;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (auto far = second_part(items[i]->begin, items[i]->end, bounds[i], side, limit, snapshot,
                               got[i].size())) {
      seconds.push_back(*far);
      second_of.push_back(i);
    }
  }
  std::vector<std::vector<KeyValue>> got_far = tr.get_ranges(seconds);
  for (std::size_t j = 0; j < second_of.size(); ++j) {
    append(got[second_of[j]], std::move(got_far[j]));
  }
  for (std::size_t i = 0; i < items.size(); ++i) remember_end(*items[i], side, got[i], bounds[i]);
  return got;
}

std::vector<KeyValue> read_end_up_to_last(Transaction& tr, const ItemRange& items, Side side,
                                          int limit) {
  std::vector<KeyValue> out = read_end(tr, items, side, limit, /*snapshot=*/true);
  if (!out.empty()) add_end_read_conflict(tr, items, side, &out.back().key);
  return out;
}

void add_end_read_conflict(Transaction& tr, const ItemRange& items, Side side,
                           const std::string* last_key) {
  if (last_key == nullptr) {
    detail::TransactionAccess::add_read_conflict_as_read(tr, items.begin, items.end);
  } else if (side == Side::kFront) {
    detail::TransactionAccess::add_read_conflict_as_read(tr, items.begin,
                                                         common::key_after(*last_key));
  } else {
    detail::TransactionAccess::add_read_conflict_as_read(tr, *last_key, items.end);
  }
}

OwnedRead first_end_read(const ItemRange& items, Side side, int limit, bool snapshot) {
  const std::optional<std::string> bound = window_bound(items, side, limit);
  const RangeRead first = first_part(items.begin, items.end, bound, side, limit, snapshot);
  return {std::string(first.begin), std::string(first.end), first.options};
}

namespace {

// The last of `found` (0 or 1 keys) as the item key it stands for: an item's, or a held place's
// (held_prefix for the subspace's prefix).
std::optional<std::string> as_item_key(const ItemRange& items, const std::vector<KeyValue>& found,
                                       const std::string& prefix) {
  if (found.empty()) return std::nullopt;
  return items.begin.substr(0, items.prefix_size) + found[0].key.substr(prefix.size());
}

}  // namespace

std::optional<std::int64_t> last_position(Transaction& tr, const ItemRange& items) {
  constexpr RangeOptions kLast{.limit = 1, .reverse = true, .snapshot = true};
  const std::string items_prefix = items.begin.substr(0, items.prefix_size);
  const KeyRange held = held_range(items);  // empty if none are kept
  // The window next to the last push's (the back hint), then, if both parts of it are empty,
  // the rest below it. A held key is the item's key with held_prefix for the subspace's prefix.
  std::optional<std::string> bound = window_bound(items, Side::kBack, 1);
  if (!windowed(items.begin, items.end, bound, 1)) bound.reset();
  std::optional<std::string> held_bound;
  if (bound && !items.held_prefix.empty()) {
    held_bound = items.held_prefix + bound->substr(items.prefix_size);
  }
  const RangeRead near[] = {{bound ? *bound : items.begin, items.end, kLast},
                            {held_bound ? *held_bound : held.begin, held.end, kLast}};
  std::vector<std::vector<KeyValue>> got = tr.get_ranges(near);
  if (bound && got[0].empty() && got[1].empty()) {
    const RangeRead far[] = {{items.begin, *bound, kLast},
                             {held.begin, held_bound ? *held_bound : held.begin, kLast}};
    got = tr.get_ranges(far);
  }
  std::optional<Place> last;
  for (const auto& key :
       {as_item_key(items, got[0], items_prefix), as_item_key(items, got[1], items.held_prefix)}) {
    const std::optional<Place> p = key ? place_of(items, *key) : std::nullopt;
    if (p && (!last || p->position > last->position)) last = p;
  }
  if (!last) return std::nullopt;
  // Remembered as the back hint (a drained work queue's pushes go behind held places only).
  if (items.hints) {
    std::lock_guard lock(items.hints->mu);
    items.hints->ends[static_cast<int>(Side::kBack)] = EndHint{*last};
  }
  return last->position;
}

}  // namespace kvq::contention
