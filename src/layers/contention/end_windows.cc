#include "layers/contention/end_windows.h"

#include <algorithm>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>

#include "client/transaction_access.h"
#include "common/bytes.h"
#include "kvq/error.h"
#include "kvq/subspace.h"
#include "kvq/tuple.h"

namespace kvq::contention {

// An item's place: (priority, position); priority is 0 in a Queue.
struct Place {
  std::int64_t priority = 0;
  std::int64_t position = 0;
};

struct EndHints {
  std::mutex mu;
  std::optional<Place> ends[2];                          // by Side
  std::unordered_map<std::int64_t, std::int64_t> tails;  // priority -> last position (pushes)
};

namespace {

// Positions a window spans beyond the hint at least (and twice the items asked for).
constexpr std::int64_t kWindow = 128;
// Bound on the remembered tails of priorities (a map, cleared when full).
constexpr std::size_t kMaxTails = 4096;

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

// Remembers where the read at `side` of `items` that returned `out` found its last item.
void remember_end(const ItemRange& items, Side side, const std::vector<KeyValue>& out) {
  if (!items.hints || out.empty()) return;
  if (auto p = place_of(items, out.back().key)) {
    std::lock_guard lock(items.hints->mu);
    items.hints->ends[static_cast<int>(side)] = p;
  }
}

// Remembers item key `key` as the last of its priority (for the next push's window).
void remember_tail(const ItemRange& items, const std::string& key) {
  if (!items.hints) return;
  auto p = place_of(items, key);
  if (!p) return;
  std::lock_guard lock(items.hints->mu);
  if (items.hints->tails.size() >= kMaxTails) items.hints->tails.clear();
  items.hints->tails[p->priority] = p->position;
}

// x mod kWindow, in [0, kWindow).
std::int64_t mod_window(std::int64_t x) { return ((x % kWindow) + kWindow) % kWindow; }

// The bound of the window that a read of `limit` items at `side` of `items` reads first, from
// the hint; nullopt without one. The window spans `window` positions beyond the hint, widened to
// a position that is a multiple of kWindow: reads made while other threads move the hint by a
// few positions then ask the same range (a prefetched read answers only the very same request;
// on etcd, a pop whose read differs from its prefetched one makes a round trip more).
std::optional<std::string> window_bound(const ItemRange& items, Side side, int limit) {
  if (!items.hints) return std::nullopt;
  std::optional<Place> hint;
  {
    std::lock_guard lock(items.hints->mu);
    hint = items.hints->ends[static_cast<int>(side)];
  }
  if (!hint) return std::nullopt;
  const std::int64_t window = std::max<std::int64_t>(kWindow, 2 * std::int64_t{limit});
  const std::int64_t from_hint = mod_window(hint->position), span = mod_window(window);
  if (side == Side::kBack) return bound_at(items, *hint, -(window + mod_window(from_hint - span)));
  return bound_at(items, *hint, window + mod_window(-(from_hint + span)));
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
  remember_end(items, side, out);
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
  for (std::size_t i = 0; i < items.size(); ++i) remember_end(*items[i], side, got[i]);
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

// Where a push of one priority looks: its items and its held places (items out on lease, laid out
// alike under ItemRange::held_prefix), each first in the window above the same bound if there is
// a hint (the last push's position less kWindow).
struct PushReads {
  KeyRange items, held;  // held: an empty range if the ItemRange keeps no held places
  std::optional<std::string> items_bound, held_bound;
};

PushReads push_reads(const ItemRange& items, std::int64_t priority) {
  PushReads r;
  const std::string items_prefix = items.begin.substr(0, items.prefix_size);
  if (items.prioritized) {
    r.items = Subspace::from_raw_prefix(items_prefix).range(Tuple().append(priority));
    if (items.hints) {
      std::lock_guard lock(items.hints->mu);
      auto it = items.hints->tails.find(priority);
      if (it != items.hints->tails.end())
        r.items_bound = bound_at(items, {priority, it->second}, -kWindow);
    }
  } else {
    r.items = {items.begin, items.end};
    r.items_bound = window_bound(items, Side::kBack, 1);
  }
  if (!windowed(r.items.begin, r.items.end, r.items_bound, 1)) r.items_bound.reset();
  if (items.held_prefix.empty()) return r;
  r.held = items.prioritized
               ? Subspace::from_raw_prefix(items.held_prefix).range(Tuple().append(priority))
               : held_range(items);
  if (r.items_bound) r.held_bound = items.held_prefix + r.items_bound->substr(items.prefix_size);
  return r;
}

// Notes the last item found for a push (the back hint of a Queue, the tail of a priority).
void remember_back(const ItemRange& items, const std::string& key) {
  if (items.prioritized) return remember_tail(items, key);
  if (!items.hints) return;
  if (auto p = place_of(items, key)) {
    std::lock_guard lock(items.hints->mu);
    items.hints->ends[static_cast<int>(Side::kBack)] = p;
  }
}

// The larger position of the last item `item` and the last held place `held` (each 0 or 1 keys),
// remembered as the back hint (a drained work queue's pushes go behind held places only).
std::optional<std::int64_t> larger_position(const ItemRange& items,
                                            const std::vector<KeyValue>& item,
                                            const std::vector<KeyValue>& held) {
  std::optional<Place> last;
  std::string last_key;
  if (!item.empty()) {
    last = place_of(items, item[0].key);
    last_key = item[0].key;
  }
  if (!held.empty()) {
    // A held key is the item's key with held_prefix for the subspace's prefix.
    std::string as_item =
        items.begin.substr(0, items.prefix_size) + held[0].key.substr(items.held_prefix.size());
    const std::optional<Place> p = place_of(items, as_item);
    if (p && (!last || p->position > last->position)) {
      last = p;
      last_key = std::move(as_item);
    }
  }
  if (!last) return std::nullopt;
  remember_back(items, last_key);
  return last->position;
}

}  // namespace

std::vector<std::optional<std::int64_t>> last_positions(Transaction& tr, const ItemRange& items,
                                                        std::span<const std::int64_t> priorities) {
  constexpr RangeOptions kLast{.limit = 1, .reverse = true, .snapshot = true};
  std::vector<PushReads> plans;
  for (std::int64_t priority : priorities) plans.push_back(push_reads(items, priority));
  // Per priority: its items' window (or all of them), then its held places' window (or all).
  std::vector<RangeRead> near;
  for (const PushReads& r : plans) {
    near.push_back({r.items_bound ? *r.items_bound : r.items.begin, r.items.end, kLast});
    near.push_back({r.held_bound ? *r.held_bound : r.held.begin, r.held.end, kLast});
  }
  std::vector<std::vector<KeyValue>> got = tr.get_ranges(near);
  // Both windows empty: the last item or held place, if any, is below the bound.
  std::vector<RangeRead> far;
  std::vector<std::size_t> far_of;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    if (!plans[i].items_bound || !got[2 * i].empty() || !got[2 * i + 1].empty()) continue;
    far.push_back({plans[i].items.begin, *plans[i].items_bound, kLast});
    far.push_back({plans[i].held.begin,
                   plans[i].held_bound ? *plans[i].held_bound : plans[i].held.begin, kLast});
    far_of.push_back(i);
  }
  std::vector<std::vector<KeyValue>> got_far = tr.get_ranges(far);
  for (std::size_t j = 0; j < far_of.size(); ++j) {
    got[2 * far_of[j]] = std::move(got_far[2 * j]);
    got[2 * far_of[j] + 1] = std::move(got_far[2 * j + 1]);
  }
  std::vector<std::optional<std::int64_t>> out;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    out.push_back(larger_position(items, got[2 * i], got[2 * i + 1]));
  }
  return out;
}

}  // namespace kvq::contention
